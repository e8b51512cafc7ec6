package main

import (
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
