package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func podGroup(name, phase string, minMember int64) unstructured.Unstructured {
	g := unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"namespace": "multinode", "name": name},
		"spec":     map[string]any{"minMember": minMember},
	}}
	if phase != "" {
		g.Object["status"] = map[string]any{"phase": phase}
	}
	return g
}

func groupPods(group string, n int) []corev1.Pod {
	var out []corev1.Pod
	for range n {
		out = append(out, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "multinode",
			Annotations: map[string]string{"scheduling.k8s.io/group-name": group}}})
	}
	return out
}

// An admitted PodGroup (Inqueue) with fewer pods than its minMember is a gang whose pods Volcano's job controller
// is about to create: the phase is not settled. With all its pods, still Pending (held back) or Running, it is.
func TestGangsAwaitingPods(t *testing.T) {
	cases := []struct {
		phase string
		pods  int
		want  int
	}{
		{"Inqueue", 0, 1}, {"Inqueue", 63, 1}, {"Inqueue", 64, 0}, {"Running", 64, 0}, {"Running", 10, 0},
		{"Pending", 0, 0}, {"", 0, 0},
	}
	for _, c := range cases {
		got := gangsAwaitingPods([]unstructured.Unstructured{podGroup("pretrain-x", c.phase, 64)},
			groupPods("pretrain-x", c.pods))
		if len(got) != c.want {
			t.Errorf("phase %q with %d of 64 pods: awaiting %v, want %d", c.phase, c.pods, got, c.want)
		}
	}
	// pods of another group, or being deleted, do not count
	deleting := groupPods("pretrain-x", 64)
	now := metav1.Now()
	for i := range deleting {
		deleting[i].DeletionTimestamp = &now
	}
	if got := gangsAwaitingPods([]unstructured.Unstructured{podGroup("pretrain-x", "Inqueue", 64)},
		append(groupPods("other", 64), deleting...)); len(got) != 1 || got[0] != "podgroup multinode/pretrain-x=Inqueue 0/64 pods" {
		t.Errorf("got %v", got)
	}
}
