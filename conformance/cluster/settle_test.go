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

// existing-dev's Indexed Job (2026-11-28): its pods' PyTorch preflight (an init container) could not pull its image
// (the nodes' tmpfs was full: "no space left on device"), the pods stayed Pending in ErrImagePull/ImagePullBackOff,
// and the gang wait ran out its whole bound (about 230 s) for launchers that could not start, until the box's
// timeout. A pod held so is not waited for; one whose launcher is being created or runs still is.
func TestTorchLauncherHeldInImagePullIsNotWaitedFor(t *testing.T) {
	launch := []string{"/bin/bash", "-c", "exec python3 -m torch.distributed.run --nnodes=2 x.py"}
	pod := func(reason string) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "multinode", Name: "train-indexed-0-6fk2z"},
			Spec: corev1.PodSpec{NodeName: "real-0", RestartPolicy: corev1.RestartPolicyNever,
				InitContainers: []corev1.Container{{Name: "preflight-nccl", Command: launch}},
				Containers:     []corev1.Container{{Name: "trainer", Command: []string{"torchrun", "--nnodes=2", "train.py"}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending,
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "preflight-nccl",
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason,
						Message: "failed to extract layer: no space left on device"}}}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "trainer",
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}},
		}
	}
	for _, reason := range []string{"ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError"} {
		p := pod(reason)
		if !torchHeld(p) || torchWaited(p) {
			t.Errorf("preflight held in %s: torchHeld %v, torchWaited %v; want held, not waited for", reason,
				torchHeld(p), torchWaited(p))
		}
		if !realPodDecided(p) {
			t.Errorf("preflight held in %s: the pod does not count as settled", reason)
		}
	}
	creating := pod("ContainerCreating")
	if torchHeld(creating) || !torchWaited(creating) {
		t.Errorf("preflight being created: torchHeld %v, torchWaited %v; want waited for", torchHeld(creating), torchWaited(creating))
	}
	// the preflight runs while the trainer's image pull fails: the preflight's gang is still forming
	running := pod("ContainerCreating")
	running.Status.InitContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	running.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}
	if torchHeld(running) || !torchWaited(running) {
		t.Errorf("preflight running: torchHeld %v, torchWaited %v; want waited for", torchHeld(running), torchWaited(running))
	}
}
