package main

// PodDisruptionBudgets as kube-controller-manager's disruption controller leaves them once a phase's gangs are bound
// (issue 40). The controller runs in the box (--controllers=*: "disruption-controller" is on by default,
// k8s.io/kubernetes@v1.33.13 cmd/kube-controller-manager/names/controller_names.go:60). It writes each budget's
// status from the pods its selector selects (pkg/controller/disruption/disruption.go trySync / updatePdbStatus
// :989-1000), or, when it cannot count the pods' controllers (maxUnavailable or a percentage over pods of a
// controller without a scale subresource: a batch Job, a Volcano Job, an MPIJob), failSafe (:971-987):
// disruptionsAllowed 0, DisruptionAllowed=False reason SyncFailed. compare.py budget_findings judges what is read.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// BudgetView is one PodDisruptionBudget and the pods it selects, as the box holds them.
type BudgetView struct {
	Namespace          string             `json:"namespace"`
	Name               string             `json:"name"`
	Spec               map[string]any     `json:"spec"`
	Generation         int64              `json:"generation"`
	ObservedGeneration int64              `json:"observedGeneration"`
	DisruptionsAllowed int32              `json:"disruptionsAllowed"`
	CurrentHealthy     int32              `json:"currentHealthy"`
	DesiredHealthy     int32              `json:"desiredHealthy"`
	ExpectedPods       int32              `json:"expectedPods"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	Selected           int                `json:"selected"` // pods the selector selects, not being deleted
	Bound              int                `json:"bound"`    // of those, bound to a node
	Ready              int                `json:"ready"`    // of those, Ready (the fake kubelet's Running pods)
	Settled            bool               `json:"settled"`  // the controller has written a status for these pods
	Pods               []string           `json:"pods,omitempty"`
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// budgetViews reads every budget and counts the pods its selector selects.
func budgetViews(ctx context.Context, b *Box) ([]BudgetView, error) {
	pdbs, err := b.Client.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := b.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []BudgetView
	for _, pdb := range pdbs.Items {
		v := viewOf(pdb)
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			sel = labels.Nothing()
		}
		for _, p := range pods.Items {
			if p.Namespace != pdb.Namespace || p.DeletionTimestamp != nil || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			v.Selected++
			v.Pods = append(v.Pods, p.Name)
			if p.Spec.NodeName != "" {
				v.Bound++
			}
			if podReady(p) {
				v.Ready++
			}
		}
		sort.Strings(v.Pods)
		v.Settled = budgetSettled(pdb, v.Ready)
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, nil
}

func viewOf(pdb policyv1.PodDisruptionBudget) BudgetView {
	v := BudgetView{Namespace: pdb.Namespace, Name: pdb.Name, Generation: pdb.Generation,
		ObservedGeneration: pdb.Status.ObservedGeneration, DisruptionsAllowed: pdb.Status.DisruptionsAllowed,
		CurrentHealthy: pdb.Status.CurrentHealthy, DesiredHealthy: pdb.Status.DesiredHealthy,
		ExpectedPods: pdb.Status.ExpectedPods, Conditions: pdb.Status.Conditions, Spec: map[string]any{}}
	if pdb.Spec.MaxUnavailable != nil {
		v.Spec["maxUnavailable"] = pdb.Spec.MaxUnavailable.String()
	}
	if pdb.Spec.MinAvailable != nil {
		v.Spec["minAvailable"] = pdb.Spec.MinAvailable.String()
	}
	return v
}

// budgetSettled: the controller's status is about the pods as they are now: it counted every Ready pod for this
// generation, or it failed to sync them (failSafe leaves the counts and sets SyncFailed).
func budgetSettled(pdb policyv1.PodDisruptionBudget, ready int) bool {
	for _, c := range pdb.Status.Conditions {
		if c.Type == policyv1.DisruptionAllowedCondition && c.Reason == policyv1.SyncFailedReason {
			return true
		}
	}
	return pdb.Status.ObservedGeneration == pdb.Generation && int(pdb.Status.CurrentHealthy) == ready &&
		len(pdb.Status.Conditions) > 0
}

// WaitBudgets waits (bounded by limit) until every budget that selects a pod has a settled status and nothing has
// changed for `quiet`, then returns the views; on the deadline it returns them as they are (Settled per budget).
func WaitBudgets(ctx context.Context, b *Box, quiet, limit time.Duration) ([]BudgetView, error) {
	start := time.Now()
	last, since := "", time.Now()
	for {
		views, err := budgetViews(ctx, b)
		if err != nil {
			return nil, err
		}
		keys, settled := []string{}, true
		for _, v := range views {
			var conds []string
			for _, c := range v.Conditions {
				conds = append(conds, c.Type+"="+string(c.Status)+"/"+c.Reason)
			}
			keys = append(keys, fmt.Sprintf("%s/%s:%s:%d:%d:%s", v.Namespace, v.Name, strings.Join(conds, ","),
				v.DisruptionsAllowed, v.CurrentHealthy, strings.Join(v.Pods, ",")))
			if v.Selected > 0 && !v.Settled {
				settled = false
			}
		}
		now := strings.Join(keys, ";")
		if now != last {
			last, since = now, time.Now()
		}
		if (settled && time.Since(since) >= quiet) || time.Since(start) >= limit || ctx.Err() != nil {
			return views, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// ServiceView is one Service as the box holds it: who owns it tells ours (applied) from a controller's (LWS's
// headless Service, the MPI operator's worker Service).
type ServiceView struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	ClusterIP string   `json:"clusterIP"`
	Owners    []string `json:"owners,omitempty"` // Kind/name of each owner reference
}

func serviceViews(ctx context.Context, b *Box) ([]ServiceView, error) {
	svcs, err := b.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []ServiceView
	for _, s := range svcs.Items {
		v := ServiceView{Namespace: s.Namespace, Name: s.Name, ClusterIP: s.Spec.ClusterIP}
		for _, o := range s.OwnerReferences {
			v.Owners = append(v.Owners, o.Kind+"/"+o.Name)
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, nil
}
