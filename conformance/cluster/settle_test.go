package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// realPod: a pod of a DaemonSet on a real node with one container in the given state.
func realPod(c corev1.ContainerStatus) corev1.Pod {
	c.Name = "reloader"
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "peermem-abcde"},
		Spec:       corev1.PodSpec{NodeName: "real-0", Containers: []corev1.Container{{Name: "reloader"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{c}},
	}
}

// A crash-looping container goes round running, terminated:Error and waiting:CrashLoopBackOff: the settle wait
// must see one unchanging, decided state, or a stack with such a pod waits out the settle limit.
func TestCrashLoopIsOneSettledState(t *testing.T) {
	realNodeNames = map[string]bool{"real-0": true}
	t.Cleanup(func() { realNodeNames = map[string]bool{} })
	failed := &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}
	loop := []corev1.ContainerStatus{
		{RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: failed}},
		{RestartCount: 1, State: corev1.ContainerState{Terminated: failed},
			LastTerminationState: corev1.ContainerState{Terminated: failed}},
		{RestartCount: 2, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: failed}},
		{RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: failed}},
	}
	first := podKey(realPod(loop[0]))
	for i, c := range loop {
		p := realPod(c)
		if k := podKey(p); k != first {
			t.Errorf("state %d of the crash loop: key %q, the first was %q", i, k, first)
		}
		if !realPodDecided(p) {
			t.Errorf("state %d of the crash loop: not decided", i)
		}
	}
	// a container still being created, then running, is two states (the settle wait sees the change)
	creating := realPod(corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
	running := realPod(corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	if podKey(creating) == podKey(running) {
		t.Errorf("ContainerCreating and running give the same key %q", podKey(running))
	}
	if realPodDecided(creating) {
		t.Errorf("a pod whose container is being created counts as decided")
	}
	// a container that exited 0 and was restarted (a restart that is no crash) keeps its states apart
	ok := &corev1.ContainerStateTerminated{Reason: "Completed", ExitCode: 0}
	again := realPod(corev1.ContainerStatus{RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: ok}})
	if podKey(again) == first {
		t.Errorf("a restart after exit 0 is taken for a crash loop")
	}
}

// volcano-llm-training: the preflight gang runs in an init container (the pod Pending) longer than the settle limit;
// a running PyTorch launcher counts as decided for the settle wait (waitGangs waits for it, bounded), and the gang
// wait names the launcher it waits for, so the trainer's gang after the preflight's is a change (a new bound).
func TestTorchLauncherInAnInitContainer(t *testing.T) {
	launch := []string{"/bin/bash", "-c", "exec python3 -m torch.distributed.run --nnodes=4 x.py"}
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "multinode", Name: "llama-pretrain-worker-0"},
		Spec: corev1.PodSpec{NodeName: "real-0",
			InitContainers: []corev1.Container{{Name: "preflight-nccl", Command: launch}},
			Containers:     []corev1.Container{{Name: "trainer", Command: []string{"torchrun", "--nnodes=4", "train.py"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "preflight-nccl",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "trainer",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}},
	}
	if realPodDecided(p) {
		t.Fatalf("a pod in its init container counts as decided by itself")
	}
	if !torchRunning(p) {
		t.Fatalf("the preflight's launcher runs: torchRunning is false")
	}
	if got := torchPending(p); got != "preflight-nccl" {
		t.Fatalf("torchPending = %q, want the init container", got)
	}
	p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	p.Status.Phase = corev1.PodRunning
	if got := torchPending(p); got != "trainer" {
		t.Fatalf("torchPending = %q after the preflight, want the trainer", got)
	}
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	if torchRunning(p) || torchPending(p) != "" {
		t.Fatalf("every launcher terminated: torchRunning %v, torchPending %q", torchRunning(p), torchPending(p))
	}
}

// azure-dev's LWS leader: its PyTorch preflight (an init container) completed, its vLLM container still being
// created: the gang wait must go on for the leader's verdict (it returned there, and the group was judged not formed).
func TestLeaderStartingAfterItsPreflight(t *testing.T) {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "multinode", Name: "llama-405b-0",
			Labels: map[string]string{lwsNameLabel: "llama-405b", lwsWorkerIdLabel: "0"}},
		Spec: corev1.PodSpec{NodeName: "real-0",
			InitContainers: []corev1.Container{{Name: "preflight-nccl"}}, Containers: []corev1.Container{{Name: "vllm"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "preflight-nccl",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "vllm",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}},
	}
	if !leaderStarting(p) {
		t.Fatalf("the leader after its preflight, its vllm container being created: not taken as starting")
	}
	worker := p
	worker.Labels = map[string]string{lwsNameLabel: "llama-405b", lwsWorkerIdLabel: "1"}
	if leaderStarting(worker) {
		t.Errorf("a worker is no gang's leading pod")
	}
	held := p
	held.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError"}}}}
	if leaderStarting(held) {
		t.Errorf("a leader held in an error is not starting: no verdict will come")
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
