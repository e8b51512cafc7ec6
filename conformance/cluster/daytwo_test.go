package main

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The Job controller's delay before a Job's next pod, per failures since its last success: 10 s doubled, capped at
// 10 min (k8s.io/kubernetes@v1.33.13 pkg/controller/job/backoff_utils.go:258-279).
func TestJobFailureBackoff(t *testing.T) {
	for failures, want := range map[int32]time.Duration{
		0: 0, 1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 4: 80 * time.Second,
		6: 320 * time.Second, 7: 10 * time.Minute, 40: 10 * time.Minute,
	} {
		if got := jobFailureBackoff(failures); got != want {
			t.Errorf("jobFailureBackoff(%d) = %s, want %s", failures, got, want)
		}
	}
}

func gangJob(name, workload string, failed int32, uncounted int, conds ...batchv1.JobConditionType) batchv1.Job {
	j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "multinode", Name: name}}
	j.Spec.Template.Labels = map[string]string{"multinode.dev/workload": workload}
	j.Status.Failed = failed
	if uncounted > 0 {
		j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
		for i := 0; i < uncounted; i++ {
			j.Status.UncountedTerminatedPods.Failed = append(j.Status.UncountedTerminatedPods.Failed, types.UID(name))
		}
	}
	for _, c := range conds {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return j
}

// torchrun-recipe's Indexed Job of 4 under a pool upgrade: the 4th eviction's replacement comes 80 s later, past the
// box's 40 s: the wait follows the backoff (plus half of boxRecover of slack) and says which Job set it.
func TestJobRecoverWaitFollowsTheBackoff(t *testing.T) {
	base := 40 * time.Second
	gangs := map[string]bool{"llm-finetune": true}
	cases := []struct {
		name string
		jobs []batchv1.Job
		want time.Duration
	}{
		{"no Job", nil, base},
		{"one failure: 10 s is within the base wait", []batchv1.Job{gangJob("llm-finetune", "llm-finetune", 1, 0)}, base},
		{"three counted: 40 s", []batchv1.Job{gangJob("llm-finetune", "llm-finetune", 3, 0)}, 60 * time.Second},
		{"three counted and one not yet: 80 s", []batchv1.Job{gangJob("llm-finetune", "llm-finetune", 3, 1)}, 100 * time.Second},
		{"a Job of no gang", []batchv1.Job{gangJob("nccl", "nccl-check", 4, 0)}, base},
		{"a failed Job replaces nothing", []batchv1.Job{gangJob("llm-finetune", "llm-finetune", 4, 0, batchv1.JobFailed)}, base},
		{"a complete Job replaces nothing", []batchv1.Job{gangJob("llm-finetune", "llm-finetune", 4, 0, batchv1.JobComplete)}, base},
	}
	for _, c := range cases {
		got, why := jobRecoverWait(c.jobs, nil, gangs, base)
		if got != c.want {
			t.Errorf("%s: wait %s, want %s", c.name, got, c.want)
		}
		if (got > base) != strings.Contains(why, "Job multinode/llm-finetune") {
			t.Errorf("%s: reason %q for a wait of %s", c.name, why, got)
		}
	}
}

// An evicted pod the Job controller has not counted yet (terminating, not in uncountedTerminatedPods) is a failure
// too: two counted and one terminating make the third failure's 40 s; a pod of another Job, or one already listed
// as uncounted, adds nothing.
func TestJobRecoverWaitCountsTheJobsTerminatingPods(t *testing.T) {
	base := 40 * time.Second
	j := gangJob("llm-finetune", "llm-finetune", 2, 0)
	j.UID = "job-1"
	pod := func(name string, job types.UID, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "multinode", Name: name, UID: types.UID(name),
			OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "x", UID: job, Controller: ptrTrue()}}}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return p
	}
	gangs := map[string]bool{"llm-finetune": true}
	if got, _ := jobRecoverWait([]batchv1.Job{j}, []corev1.Pod{pod("a", "job-1", true), pod("b", "job-1", false),
		pod("c", "job-2", true)}, gangs, base); got != 60*time.Second {
		t.Errorf("2 counted + 1 terminating: wait %s, want 60s", got)
	}
	j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Failed: []types.UID{"a"}}
	if got, _ := jobRecoverWait([]batchv1.Job{j}, []corev1.Pod{pod("a", "job-1", true)}, gangs, base); got != 60*time.Second {
		t.Errorf("2 counted + 1 uncounted (terminating, listed): wait %s, want 60s", got)
	}
}

func ptrTrue() *bool { b := true; return &b }

// /proc/<pid>/stat: utime (field 14) + stime (field 15) in clock ticks, counted after the command name, which may
// hold spaces and parentheses (proc(5)).
func TestProcCPU(t *testing.T) {
	stat := "4242 (py (gate) x) S 1 4242 4242 0 -1 4194304 1200 0 0 0 167 9 0 0 20 0 1 0 123 456 789"
	got, err := procCPU(stat)
	if err != nil || got != 1760*time.Millisecond {
		t.Errorf("procCPU = %s, %v; want 1.76s", got, err)
	}
	if _, err := procCPU("4242 (py) S 1 2"); err == nil {
		t.Error("procCPU of a short line: no error")
	}
}

// The health gate is stopped for the CPU it uses, not for the wall time a loaded machine makes it take: a gate that
// has used less CPU than its limit runs on past that limit in wall time (at load average 22-27 on 2 cores its 1.8 s
// of CPU took more than the 90 s wall limit it had); one that computes past its CPU limit, or hangs past the wall
// limit, is stopped, saying which.
func TestOverLimit(t *testing.T) {
	for _, c := range []struct {
		cpu, wall time.Duration
		want      string
	}{
		{2 * time.Second, 3 * time.Minute, ""},
		{31 * time.Second, 40 * time.Second, "of CPU (limit 30s)"},
		{time.Second, 6 * time.Minute, "of wall time (limit 5m0s)"},
	} {
		got := overLimit(c.cpu, c.wall, 30*time.Second, 5*time.Minute)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("overLimit(cpu %s, wall %s) = %q, want %q", c.cpu, c.wall, got, c.want)
		}
	}
}

func TestRunLimited(t *testing.T) {
	ctx := context.Background()
	// little CPU, longer in wall time than the CPU limit: runs to its end
	out, err := runLimited(ctx, "sh -c 'sleep 1; echo done'", 300*time.Millisecond, 30*time.Second)
	if err != nil || strings.TrimSpace(string(out)) != "done" {
		t.Errorf("a sleeping command: %q, %v; want done", out, err)
	}
	// a busy loop: stopped once past its CPU limit
	start := time.Now()
	_, err = runLimited(ctx, "sh -c 'while :; do :; done'", 200*time.Millisecond, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "of CPU (limit 200ms)") || time.Since(start) > 20*time.Second {
		t.Errorf("a busy loop: %v after %s; want stopped for its CPU", err, time.Since(start))
	}
	// a hung command: stopped at the wall limit
	_, err = runLimited(ctx, "sleep 30", 10*time.Second, 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "of wall time (limit 500ms)") {
		t.Errorf("a hung command: %v; want stopped at the wall limit", err)
	}
	// a failing command: its exit and stderr
	_, err = runLimited(ctx, "sh -c 'echo bad input >&2; exit 2'", 10*time.Second, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exit status 2 bad input") {
		t.Errorf("a failing command: %v", err)
	}
}

// nextImage is the rule conformance/pulumi/rollout_up.py next_image repeats (the stack's changed image in the
// rollout through `pulumi up`): tests/test_rollout_up.py pins the same cases
func TestNextImage(t *testing.T) {
	for img, want := range map[string]string{
		"nvcr.io/nim/meta/llama-3.1-405b-instruct:1.8.0": "nvcr.io/nim/meta/llama-3.1-405b-instruct:1.8.0-rollout",
		"localhost:5000/vllm":                            "localhost:5000/vllm:rollout",
		"docker.io/vllm/vllm-openai:v0.31.0@sha256:abc":  "docker.io/vllm/vllm-openai:v0.31.0-rollout",
	} {
		if got := nextImage(img); got != want {
			t.Errorf("nextImage(%q) = %q, want %q", img, got, want)
		}
	}
}

// The cordon's fault on a pod that restarts its containers is reported as the kubelet would: the first container
// restarted once, its exit in lastState, the pod kept (what LWS's RecreateGroupOnPodRestart acts on).
func TestRestartedAsTheKubeletReports(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	q := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker"}, {Name: "sidecar"}}}}
	q.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "sidecar", RestartCount: 0},
		{Name: "worker", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
	}
	restarted(q, t0.Add(time.Minute))
	w := q.Status.ContainerStatuses[1]
	if w.RestartCount != 3 || w.State.Running == nil || !w.State.Running.StartedAt.Time.Equal(t0.Add(time.Minute)) {
		t.Fatalf("worker not restarted: %+v", w)
	}
	if term := w.LastTerminationState.Terminated; term == nil || term.ExitCode != 1 || !term.StartedAt.Time.Equal(t0) {
		t.Fatalf("the exit not in lastState: %+v", w.LastTerminationState)
	}
	if q.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("sidecar restarted too: %+v", q.Status.ContainerStatuses[0])
	}
	// no status yet (the kubelet has not reported): one is made, restarted once
	r := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "leader"}}}}
	restarted(r, t0)
	if len(r.Status.ContainerStatuses) != 1 || r.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Fatalf("no restarted status made: %+v", r.Status.ContainerStatuses)
	}
}
