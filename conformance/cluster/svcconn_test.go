package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// aws-dev's vLLM leader: its server listens once its Ray group formed, its Ready condition follows the kubelet's
// next probes; the Service check waits for that (a dial before it is refused by kube-proxy: no ready endpoint),
// and only for that: a pod that does not listen on its probe's port will not become Ready by waiting.
func TestReadyComingOnlyWhenTheProbedPortListens(t *testing.T) {
	c := corev1.Container{Name: "vllm", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("http")}}}}
	p := corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "vllm", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	if !readyComing(p, []int{6379, 8000}) {
		t.Errorf("running, not Ready, listening on the readiness probe's port (named http = 8000): its readiness is coming")
	}
	if readyComing(p, []int{6379}) {
		t.Errorf("nothing listens on 8000: waiting would not make it Ready")
	}
	ready := p
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if readyComing(ready, []int{8000}) {
		t.Errorf("a Ready pod is not waited for")
	}
	// no readiness probe: the startup probe's port; an exec probe has none
	p.Spec.Containers[0].ReadinessProbe = nil
	p.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9000)}}}
	if !readyComing(p, []int{9000}) {
		t.Errorf("the startup probe's port 9000 listens: its readiness is coming")
	}
	p.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	if readyComing(p, []int{9000}) {
		t.Errorf("an exec probe names no port")
	}
}
