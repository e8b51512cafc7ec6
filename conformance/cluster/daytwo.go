package main

// Day two, played on the engines (issue 44): once the stack's phases are done, the box plays
//  1. a node failure: one node holding gang pods stops its heartbeats (its fake kubelet stops: no Lease, no
//     NodeStatus, no pod touched); kube-controller-manager's node lifecycle controller marks it Unknown and taints it
//     node.kubernetes.io/unreachable:NoExecute, its taint-eviction controller deletes each pod once the pod's
//     toleration of that taint runs out; the cloud's node repair then deletes the Node (the box force-deletes the
//     pods left Terminating on it, as kube-controller-manager's pod GC does for pods of a deleted node after 40 s,
//     k8s.io/kubernetes@v1.33.13 pkg/controller/podgc/gc_controller.go:51), each gang's controller recovers it
//     (LWS recreates the group, Volcano applies the job's policies), the gang must end whole or whole-Pending, never
//     half-bound; then the repaired node comes back (registered again) and every gang must be whole again;
//  2. a pool upgrade, as the clouds run it (surge): the pool gets its surge nodes (shaped like its nodes: labels,
//     taints, allocatable, CSINode), then every node that held gang pods is cordoned and drained, one at a time,
//     through the Eviction API (policy/v1 Eviction: the API server enforces each PodDisruptionBudget), retrying a
//     refused eviction until the drain timeout; each gang must lose at most what its budget allows, come back whole,
//     and restart as upgrades.json predicts.
// The batch gangs (a Volcano Job, an Indexed Job, an MPIJob) run one at a time beside the services (placement.json);
// the first batch object that upgrades.json names as a gang is applied again for these scenarios, so the services'
// gangs and that one are played. What the box saw, against what plan predicted, goes to build/<stack>/day-two.json;
// its findings fail the box (compare.py reads them).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The box's day-two clock. Real clusters count minutes (a drain waits 15 min on EKS, drainTimeoutMinutes on AKS, up to
// 60 on GKE; a pod tolerates an unreachable node 300 s); the box has no image pulls or model loads, its controllers
// restore a gang in seconds, so each wait is cut to what one evict-restart cycle takes here. A drain still refused
// at boxDrainTimeout is refused for the reason its budget's status gives (printed), which a longer wait does not
// change while no pod of the gang becomes Ready.
var (
	nodeMonitorGrace         = 20 * time.Second // controller-manager --node-monitor-grace-period (controlplane.go)
	defaultTolerationSeconds = 10 * time.Second // the API server's default not-ready/unreachable toleration
	boxDrainTimeout          = 20 * time.Second // per node, in place of the stack's drain timeout
	boxRecover               = 40 * time.Second // longest wait for a gang to be whole (or whole-Pending) again
	boxLongestToleration     = 60 * time.Second // a longer toleration is listed as not checked, not waited for
)

// The Job controller's pod-failure backoff (k8s.io/kubernetes@v1.33.13 pkg/controller/job/job_controller.go:69-72
// DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff): a batch/v1 Job's replacement pod waits 10 s after its first
// failure, doubled per further failure since the last success, at most 10 min (backoff_utils.go:258-279
// getRemainingTimeForFailuresCount). An evicted or deleted pod of a Job counts as a failure (job_controller.go:1983-1992
// isPodFailed), so every drain or loss of an Indexed Job's (or an MPIJob launcher Job's) pod delays the next one more.
var (
	jobBackoffBase = 10 * time.Second
	jobBackoffMax  = 10 * time.Minute
)

// jobFailureBackoff: the delay the Job controller puts on a Job's next pod after `failures` failures since its last
// success (0: none), as getRemainingTimeForFailuresCount computes it at the moment of the last failure.
func jobFailureBackoff(failures int32) time.Duration {
	if failures <= 0 {
		return 0
	}
	d := jobBackoffBase
	for i := int32(1); i < failures; i++ {
		d *= 2
		if d >= jobBackoffMax {
			return jobBackoffMax
		}
	}
	return d
}

// jobRecoverWait: how long the box waits for its gangs to be whole again (base, boxRecover) when some are run by
// batch/v1 Jobs: a Job of a gang (its pod template's multinode.dev/workload in gangs) that is not finished replaces
// its next pod only after its pod-failure backoff, counted from its failures: status.failed (pods whose tracking
// finalizer is gone), the failed pods it has seen but not yet counted (status.uncountedTerminatedPods), and its pods
// being deleted that it has not seen yet (each a failure, isPodFailed). That is an upper bound of
// failuresAfterLastSuccess (and, with backoffLimitPerIndex, of an index's own count), so the wait is that backoff
// plus half of base of slack, when longer than base. Returns the wait and, when a Job lengthened it, why.
func jobRecoverWait(jobs []batchv1.Job, pods []corev1.Pod, gangs map[string]bool, base time.Duration) (time.Duration, string) {
	wait, why := base, ""
	for _, j := range jobs {
		if !gangs[j.Spec.Template.Labels["multinode.dev/workload"]] || jobFinished(j) {
			continue
		}
		failures := j.Status.Failed
		seen := map[types.UID]bool{}
		if u := j.Status.UncountedTerminatedPods; u != nil {
			failures += int32(len(u.Failed))
			for _, uid := range u.Failed {
				seen[uid] = true
			}
		}
		for _, p := range pods {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == j.UID && p.DeletionTimestamp != nil &&
				p.Status.Phase != corev1.PodSucceeded && !seen[p.UID] {
				failures++
			}
		}
		if w := jobFailureBackoff(failures) + base/2; w > wait {
			wait = w
			why = fmt.Sprintf("Job %s/%s: %d pod failure(s), its next pod after %s (the Job controller's backoff)",
				j.Namespace, j.Name, failures, jobFailureBackoff(failures))
		}
	}
	return wait, why
}

func jobFinished(j batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobComplete) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// recoverWait: boxRecover, or the longer wait a gang's Job needs (jobRecoverWait); the reason is logged
func (d *dayTwo) recoverWait(ctx context.Context) time.Duration {
	jobs, err := d.box.Client.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return boxRecover
	}
	pods, err := d.box.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return boxRecover
	}
	gangs := map[string]bool{}
	for g := range d.size {
		gangs[strings.SplitN(g, "/", 2)[0]] = true
	}
	wait, why := jobRecoverWait(jobs.Items, pods.Items, gangs, boxRecover)
	if why != "" && why != d.waitWhy {
		d.logf("day two: waiting up to %s for the gangs: %s", wait, why)
	}
	d.waitWhy = why
	return wait
}

const unreachableTaint = "node.kubernetes.io/unreachable"
const notReadyTaint = "node.kubernetes.io/not-ready"

// upgradesJSON: the parts of build/<stack>/upgrades.json (multinode/upgrades.py as_json) the scenarios predict from.
type upgradesJSON struct {
	Pools []struct {
		Pool             string `json:"pool"`
		Strategy         string `json:"strategy"`
		NodeCount        int    `json:"nodeCount"`
		LargestGang      int    `json:"largestGang"`
		SpareNodes       int    `json:"spareNodes"`
		Surge            int    `json:"surge"`
		RoomToSurge      bool   `json:"roomToSurge"`
		DrainTimeout     int    `json:"drainTimeoutMinutes"`
		DrainWait        string `json:"drainWait"`
		BadNodesSurvived int    `json:"badNodesSurvived"`
		Gangs            []struct {
			Workload           string `json:"workload"`
			Kind               string `json:"kind"`
			Nodes              int    `json:"nodes"`
			Groups             int    `json:"groups"`
			Service            bool   `json:"service"`
			Budget             string `json:"budget"`
			DisruptionsAllowed int    `json:"disruptionsAllowed"`
			OnUpgrade          string `json:"onUpgrade"`
			// the same prediction for a program (multinode/upgrades.py restart_model)
			RestartsAtMost *int     `json:"restartsAtMost"`
			WholeRestartOn []string `json:"wholeRestartOn"`
			PartialOn      []string `json:"partialOn"`
			EndsOn         []string `json:"endsOn"`
		} `json:"gangs"`
	} `json:"pools"`
	// per LWS, what an image change rolls (multinode/upgrades.py Rollout.as_dict); other kinds carry no groups
	Rollouts []struct {
		Workload       string `json:"workload"`
		Kind           string `json:"kind"`
		Groups         int    `json:"groups"`
		GroupSize      int    `json:"groupSize"`
		MaxSurge       int    `json:"maxSurge"`
		MaxUnavailable int    `json:"maxUnavailable"`
		SpareNodes     int    `json:"spareNodes"`
		ImageChange    string `json:"imageChange"`
	} `json:"rollouts"`
}

// restartModel: upgrades.json's restartsAtMost / wholeRestartOn / partialOn / endsOn of one workload's gangs.
type restartModel struct {
	most                 int
	whole, partial, ends map[string]bool // roles ("*": any)
}

// endsFor: a role lost is one whose loss ends the job for good (upgrades.json endsOn: a NIM MPIJob's launcher, its
// launcher Job's backoffLimit 0); such a gang is not recreated, and must not come back whole
func (m restartModel) endsFor(roles []string) []string {
	var out []string
	for _, r := range roles {
		if m.ends[r] || m.ends["*"] {
			out = append(out, r)
		}
	}
	return out
}

func (m restartModel) wholeOn(roles map[string]bool) bool {
	if m.whole["*"] {
		return true
	}
	for r := range roles {
		if m.whole[r] {
			return true
		}
	}
	return false
}

// partialFor: every role lost is one whose loss replaces only part of the gang
func (m restartModel) partialFor(roles []string) bool {
	if len(roles) == 0 {
		return false
	}
	for _, r := range roles {
		if !m.partial[r] && !m.partial["*"] {
			return false
		}
	}
	return true
}

// GangView: one gang (the pods of one workload, or of one LWS group) as the box holds it.
type GangView struct {
	Gang     string   `json:"gang"`
	Workload string   `json:"workload"`
	Kind     string   `json:"kind,omitempty"` // upgrades.json's kind
	Pool     string   `json:"pool,omitempty"`
	Size     int      `json:"size"` // pods when whole (counted when the scenario starts)
	Pods     int      `json:"pods"` // pods not being deleted
	Bound    int      `json:"bound"`
	Ready    int      `json:"ready"`
	Nodes    []string `json:"nodes,omitempty"`
	// budget: the PodDisruptionBudgets selecting its pods, and the fewest disruptions one of them allows
	Budgets []string `json:"budgets,omitempty"`
	Allowed *int32   `json:"disruptionsAllowed,omitempty"`
	// what plan predicts (upgrades.json): the disruptions its budget allows and what an upgrade does to it
	PredictedAllowed *int   `json:"predictedDisruptionsAllowed,omitempty"`
	PredictedUpgrade string `json:"predictedOnUpgrade,omitempty"`
	uids             map[types.UID]bool
}

func (g GangView) whole() bool     { return g.Size > 0 && g.Ready == g.Size && g.Pods == g.Size }
func (g GangView) halfBound() bool { return g.Bound > 0 && g.Bound < g.Size }

// DrainStep: one node cordoned and drained.
type DrainStep struct {
	Node        string            `json:"node"`
	Evicted     []string          `json:"evicted,omitempty"`
	Refused     int               `json:"refusedEvictions"`
	LastRefusal map[string]string `json:"lastRefusal,omitempty"` // pod -> the API server's answer
	Completed   bool              `json:"completed"`
	Left        []string          `json:"left,omitempty"` // pods still on the node at the drain timeout
	Seconds     float64           `json:"seconds"`
	// gangs whole again after the drain (the surge nodes take them), seconds it took
	WholeAfter bool    `json:"wholeAfter"`
	Recovered  float64 `json:"recoveredSeconds"`
}

// GangOutcome: per gang, what the scenario did to it.
type GangOutcome struct {
	Gang               string   `json:"gang"`
	PredictedAllowed   *int     `json:"predictedDisruptionsAllowed,omitempty"`
	PredictedUpgrade   string   `json:"predictedOnUpgrade,omitempty"`
	AllowedByBudget    *int32   `json:"disruptionsAllowedByBudget,omitempty"`
	MostLostByEviction int      `json:"mostReadyPodsEvictedBeforeWhole"`
	Restarts           int      `json:"restartsWhole"`   // every pod replaced at once
	PartialRestarts    int      `json:"partialRestarts"` // some pods replaced, others kept running
	End                string   `json:"end"`             // whole | whole-Pending | half-bound (n of m) | gone
	NodesAtEnd         []string `json:"nodesAtEnd,omitempty"`
	OnSurgeNodes       bool     `json:"onSurgeNodes,omitempty"`
	Note               string   `json:"note,omitempty"`
}

type DrainResult struct {
	SurgeNodes   []string      `json:"surgeNodes"`
	DrainTimeout string        `json:"drainTimeout"`
	StackDrain   []string      `json:"stackDrainTimeout,omitempty"` // per pool, what the cloud does (upgrades.json)
	Steps        []DrainStep   `json:"steps"`
	Gangs        []GangOutcome `json:"gangs"`
	Events       []EventView   `json:"events,omitempty"`
	Seconds      float64       `json:"seconds"`
}

type PodEviction struct {
	Pod        string  `json:"pod"`
	Gang       string  `json:"gang,omitempty"`
	Role       string  `json:"role,omitempty"` // multinode.dev/role
	Toleration string  `json:"toleration"`     // of the taint the node got: "10s", "forever", "none"
	Marked     bool    `json:"markedForDeletion"`
	After      float64 `json:"secondsAfterTaint,omitempty"`
}

type FailureResult struct {
	Node      string        `json:"node"`
	Taint     string        `json:"taint,omitempty"`
	TaintedAt float64       `json:"taintedAfterSeconds,omitempty"`
	Pods      []PodEviction `json:"pods"`
	// after the node's pods are gone: each gang whole elsewhere, whole-Pending, or half-bound (a finding)
	GangsAfterLoss []GangOutcome `json:"gangsAfterLoss"`
	// after the repaired node is back
	GangsAfterRepair []GangOutcome `json:"gangsAfterRepair"`
	Events           []EventView   `json:"events,omitempty"`
	Seconds          float64       `json:"seconds"`
}

type DayTwoReport struct {
	Stack      string            `json:"stack"`
	Settings   map[string]string `json:"settings"`
	Batch      string            `json:"batchGang,omitempty"` // the batch object applied again for the scenarios
	Gangs      []GangView        `json:"gangs"`               // when the scenarios start
	Failure    *FailureResult    `json:"nodeFailure,omitempty"`
	NotReady   *FailureResult    `json:"nodeNotReady,omitempty"` // the kubelet keeps its Lease, reports Ready=False
	Cordon     *CordonResult     `json:"cordon,omitempty"`
	Rollout    *RolloutResult    `json:"rollout,omitempty"`
	Drain      *DrainResult      `json:"drain,omitempty"`
	Findings   []string          `json:"findings"`
	NotChecked []string          `json:"notChecked"`
	Seconds    float64           `json:"seconds"`
}

// gangOf: the gang a pod belongs to: its workload, and its LWS group where it has one; "" for pods of no gang.
func gangOf(p corev1.Pod) string {
	w := p.Labels["multinode.dev/workload"]
	if w == "" {
		return ""
	}
	if g, ok := p.Labels["leaderworkerset.sigs.k8s.io/group-index"]; ok {
		return w + "/group-" + g
	}
	return w
}

func ownedByDaemonSet(p corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

type dayTwo struct {
	box   *Box
	kl    *FakeKubelet
	ap    *Applier
	rep   *DayTwoReport
	up    upgradesJSON
	size  map[string]int // gang -> pods when whole
	pool  map[string]string
	nodes []corev1.Node           // nodes.yaml
	model map[string]restartModel // workload -> upgrades.json's restart prediction
	objs  []Object                // the stack's objects (the LWS of the rollout)
	gate  string                  // the health gate command (health_gate.py <stack file>), run with the kubeconfig
	// the batch object played (applied again beside the services), the box's settle times, and whether a scenario
	// ended its gang as upgrades.json predicts (endsOn): then it is run again before the next scenario
	played        *Object
	quiet, settle time.Duration
	ended         bool
	waitWhy       string // the last reason recoverWait logged
	logf          func(string, ...any)
	start         time.Time
}

func (d *dayTwo) finding(f string, a ...any) {
	d.rep.Findings = append(d.rep.Findings, fmt.Sprintf(f, a...))
}

// gangs reads every gang of the starting set as the box holds it now.
func (d *dayTwo) gangs(ctx context.Context) (map[string]*GangView, []corev1.Pod, error) {
	pods, err := d.box.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	out := map[string]*GangView{}
	for g, n := range d.size {
		out[g] = &GangView{Gang: g, Size: n, uids: map[types.UID]bool{}}
	}
	for _, p := range pods.Items {
		g := out[gangOf(p)]
		if g == nil || p.DeletionTimestamp != nil {
			continue
		}
		g.Pods++
		g.uids[p.UID] = true
		if p.Spec.NodeName != "" {
			g.Bound++
			g.Nodes = append(g.Nodes, p.Spec.NodeName)
		}
		if podReady(p) && p.Spec.NodeName != "" {
			g.Ready++
		}
	}
	for _, g := range out {
		sort.Strings(g.Nodes)
	}
	return out, pods.Items, nil
}

// RunDayTwo plays the scenarios on the box as boxRun leaves it and writes build/<stack>/day-two.json.
func RunDayTwo(ctx context.Context, box *Box, kl *FakeKubelet, ap *Applier, stackDir string, nodes []corev1.Node,
	objects, batch []Object, gate string, quiet, settle time.Duration, logf func(string, ...any)) (*DayTwoReport, error) {
	d := &dayTwo{box: box, kl: kl, ap: ap, nodes: nodes, logf: logf, start: time.Now(), size: map[string]int{},
		pool: map[string]string{}, model: map[string]restartModel{}, objs: objects, gate: gate, rep: &DayTwoReport{Stack: filepath.Base(stackDir), Findings: []string{},
			NotChecked: []string{}, Settings: map[string]string{
				"node-monitor-grace-period (controller-manager)":               nodeMonitorGrace.String(),
				"default not-ready/unreachable tolerationSeconds (API server)": defaultTolerationSeconds.String(),
				"drain timeout per node (box)":                                 boxDrainTimeout.String(),
				"recovery wait per gang (box)":                                 boxRecover.String() + " (longer while a gang's Job backs off: jobRecoverWait)",
				"fake kubelet heartbeat":                                       heartbeatEvery.String(),
			}}}
	defer func() { d.rep.Seconds = time.Since(d.start).Seconds() }()
	data, err := os.ReadFile(filepath.Join(stackDir, "upgrades.json"))
	if err != nil {
		return d.rep, fmt.Errorf("upgrades.json: %w", err)
	}
	if err := json.Unmarshal(data, &d.up); err != nil {
		return d.rep, fmt.Errorf("upgrades.json: %w", err)
	}
	predicted := map[string]int{}
	upgrade := map[string]string{}
	batchGang := map[string]bool{}
	for _, p := range d.up.Pools {
		for _, g := range p.Gangs {
			predicted[g.Workload], upgrade[g.Workload], d.pool[g.Workload] = g.DisruptionsAllowed, g.OnUpgrade, p.Pool
			m := restartModel{most: 1, whole: map[string]bool{}, partial: map[string]bool{}, ends: map[string]bool{}}
			if g.RestartsAtMost != nil {
				m.most = *g.RestartsAtMost
			}
			for _, r := range g.WholeRestartOn {
				m.whole[r] = true
			}
			for _, r := range g.PartialOn {
				m.partial[r] = true
			}
			for _, r := range g.EndsOn {
				m.ends[r] = true
			}
			d.model[g.Workload] = m
			if !g.Service {
				batchGang[g.Workload] = true
			}
		}
	}
	// the first batch object upgrades.json names as a gang (or the one --day-two-batch names), applied again beside
	// the services
	var played *Object
	for i, o := range batch {
		w := o.U.GetLabels()["multinode.dev/workload"]
		if dayTwoBatch != "" && w != dayTwoBatch && o.U.GetName() != dayTwoBatch {
			continue
		}
		if batchGang[w] || batchGang[o.U.GetName()] {
			played = &batch[i]
			break
		}
	}
	if dayTwoBatch != "" && played == nil {
		d.finding("day two: --day-two-batch %s names no batch gang of the stack (upgrades.json gangs, batch objects)",
			dayTwoBatch)
	}
	if played != nil {
		d.rep.Batch = played.Key()
		if err := ap.Apply(ctx, *played, 20*time.Second); err != nil {
			d.finding("day two: %s could not be applied again: %v", played.Key(), err)
			played = nil
		} else {
			defer func() {
				if err := ap.Delete(context.Background(), *played); err == nil {
					ap.WaitGone(ctx, box, played.Key(), 30*time.Second)
				}
			}()
			if _, _, err := Settle(ctx, box, quiet/2, settle, 2*time.Second); err != nil {
				return d.rep, err
			}
		}
	}
	for _, o := range batch {
		if played == nil || o.Key() != played.Key() {
			if w := o.U.GetLabels()["multinode.dev/workload"]; batchGang[w] {
				d.rep.NotChecked = append(d.rep.NotChecked, fmt.Sprintf("%s: a batch gang not played (the box plays the "+
					"first batch gang of the stack beside the services, or the one DAY_TWO_BATCH names)", o.Key()))
			}
		}
	}
	// the gangs: every workload with two or more pods, counted now (each whole: the phases are settled)
	pods, err := box.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return d.rep, err
	}
	for _, p := range pods.Items {
		if g := gangOf(p); g != "" && p.DeletionTimestamp == nil {
			d.size[g]++
		}
	}
	for g, n := range d.size {
		if n < 2 {
			delete(d.size, g)
		}
	}
	if len(d.size) == 0 {
		d.rep.NotChecked = append(d.rep.NotChecked, "day two: no gang of two or more pods runs in the box")
		return d.rep, nil
	}
	gs, _, err := d.gangs(ctx)
	if err != nil {
		return d.rep, err
	}
	budgets, err := budgetViews(ctx, box)
	if err != nil {
		return d.rep, err
	}
	for _, g := range gs {
		w := strings.SplitN(g.Gang, "/", 2)[0]
		g.Workload, g.Pool, g.PredictedUpgrade = w, d.pool[w], upgrade[w]
		if n, ok := predicted[w]; ok {
			g.PredictedAllowed = ptr.To(n)
		}
		for _, b := range budgets {
			for _, pn := range b.Pods {
				if pod := findPod(pods.Items, b.Namespace, pn); pod != nil && gangOf(*pod) == g.Gang {
					g.Budgets = append(g.Budgets, b.Namespace+"/"+b.Name)
					if g.Allowed == nil || b.DisruptionsAllowed < *g.Allowed {
						g.Allowed = ptr.To(b.DisruptionsAllowed)
					}
					break
				}
			}
		}
		for _, p := range d.up.Pools {
			for _, ug := range p.Gangs {
				if ug.Workload == w {
					g.Kind = ug.Kind
				}
			}
		}
		if !g.whole() {
			d.rep.NotChecked = append(d.rep.NotChecked, fmt.Sprintf("gang %s is not whole when day two starts "+
				"(%d of %d pods Ready): its scenarios are judged from that state", g.Gang, g.Ready, g.Size))
		}
		d.rep.Gangs = append(d.rep.Gangs, *g)
	}
	sort.Slice(d.rep.Gangs, func(i, j int) bool { return d.rep.Gangs[i].Gang < d.rep.Gangs[j].Gang })
	logf("day two: %d gangs (%s)", len(d.rep.Gangs), strings.Join(keys(d.size), ", "))

	d.played, d.quiet, d.settle = played, quiet, settle
	t0 := time.Now()
	if rolloutUpCmd != "" {
		d.rep.NotChecked = append(d.rep.NotChecked, "node failure, not-ready node, cordoned bad node, pool upgrade: not "+
			"played with --day-two-rollout-up (the model rollout through `pulumi up` alone; the others: make day-two-stacks)")
		if err := d.rollout(ctx); err != nil {
			return d.rep, fmt.Errorf("rollout: %w", err)
		}
		logf("day two: model rollout through the command played in %.0fs", time.Since(t0).Seconds())
		return d.rep, nil
	}
	if err := d.nodeFailure(ctx, stopsReporting); err != nil {
		return d.rep, fmt.Errorf("node failure: %w", err)
	}
	logf("day two: node failure played in %.0fs", time.Since(t0).Seconds())
	if dayTwoNotReady {
		// a fresh run of the batch gang: every restart counts against a Volcano job's maxRetry for its life (rerunBatch),
		// and the cordon after this one restarts it again
		if err := d.rerunBatch(ctx, "not-ready node"); err != nil {
			return d.rep, err
		}
		t0 = time.Now()
		if err := d.nodeFailure(ctx, reportsNotReady); err != nil {
			return d.rep, fmt.Errorf("node not ready: %w", err)
		}
		logf("day two: not-ready node played in %.0fs", time.Since(t0).Seconds())
	} else {
		d.rep.NotChecked = append(d.rep.NotChecked, "node not ready: a node that keeps its Lease and reports "+
			"Ready=False (the not-ready taint) is played with --day-two-not-ready (DAY_TWO_NOT_READY=1)")
	}
	if d.ended {
		// the batch gang ended as upgrades.json predicts (endsOn): the next scenario starts from a fresh run
		if err := d.rerunBatch(ctx, "cordon"); err != nil {
			return d.rep, err
		}
	}
	t0 = time.Now()
	if err := d.cordon(ctx); err != nil {
		return d.rep, fmt.Errorf("cordon: %w", err)
	}
	logf("day two: cordoned bad node played in %.0fs", time.Since(t0).Seconds())
	t0 = time.Now()
	if err := d.rollout(ctx); err != nil {
		return d.rep, fmt.Errorf("rollout: %w", err)
	}
	logf("day two: model rollout played in %.0fs", time.Since(t0).Seconds())
	if err := d.rerunBatch(ctx, "upgrade"); err != nil {
		return d.rep, err
	}
	t0 = time.Now()
	if err := d.drain(ctx); err != nil {
		return d.rep, fmt.Errorf("drain: %w", err)
	}
	logf("day two: pool upgrade (surge, drain) played in %.0fs", time.Since(t0).Seconds())
	return d.rep, nil
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func findPod(pods []corev1.Pod, ns, name string) *corev1.Pod {
	for i := range pods {
		if pods[i].Namespace == ns && pods[i].Name == name {
			return &pods[i]
		}
	}
	return nil
}

// gangNodes: the nodes holding pods of a gang, in name order, with the gang pods on each.
func (d *dayTwo) gangNodes(ctx context.Context) ([]string, map[string]int, error) {
	gs, _, err := d.gangs(ctx)
	if err != nil {
		return nil, nil, err
	}
	count := map[string]int{}
	for _, g := range gs {
		for _, n := range g.Nodes {
			count[n]++
		}
	}
	return keys(count), count, nil
}

// busiestGangNode is the node a fault scenario strikes: the one holding the most gang pods, the first by name among
// them. "" when no gang pod is bound or that node is a real node (each said in NotChecked, `what` naming the scenario
// and `realWhy` why a real node is left alone).
func (d *dayTwo) busiestGangNode(ctx context.Context, what, realWhy string) (string, error) {
	names, count, err := d.gangNodes(ctx)
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		d.rep.NotChecked = append(d.rep.NotChecked, what+": no gang pod is bound")
		return "", nil
	}
	victim := names[0]
	for _, n := range names {
		if count[n] > count[victim] {
			victim = n
		}
	}
	if realNodeNames[victim] {
		d.rep.NotChecked = append(d.rep.NotChecked, what+": "+victim+" is a real node"+realWhy)
		return "", nil
	}
	return victim, nil
}

// waitGangs polls until every gang is whole or holds no bound pod (whole-Pending) and nothing changed for 4 s, or
// `limit`; it returns the gangs as they are then.
func (d *dayTwo) waitGangs(ctx context.Context, limit time.Duration, wantWhole bool) (map[string]*GangView, bool, error) {
	start, last, since := time.Now(), "", time.Now()
	for {
		gs, _, err := d.gangs(ctx)
		if err != nil {
			return nil, false, err
		}
		var sig []string
		done := true
		for _, k := range keys(gs) {
			g := gs[k]
			sig = append(sig, fmt.Sprintf("%s:%d:%d:%d", k, g.Pods, g.Bound, g.Ready))
			if !g.whole() && (wantWhole || g.Bound > 0) {
				done = false
			}
		}
		now := strings.Join(sig, ";")
		if now != last {
			last, since = now, time.Now()
		}
		// whole or whole-Pending and quiet for 4 s; after a loss (wantWhole false) any state quiet for 6 s is where
		// the controllers leave it (a half-bound gang is then judged, not waited for)
		quietFor := time.Since(since)
		if (done && quietFor >= 4*time.Second) || (!wantWhole && quietFor >= 6*time.Second) ||
			time.Since(start) >= limit || ctx.Err() != nil {
			return gs, done, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func outcome(g *GangView) GangOutcome {
	o := GangOutcome{Gang: g.Gang, NodesAtEnd: g.Nodes, PredictedAllowed: g.PredictedAllowed, PredictedUpgrade: g.PredictedUpgrade}
	switch {
	case g.whole():
		o.End = "whole"
	case g.Bound == 0:
		o.End = fmt.Sprintf("whole-Pending (%d of %d pods exist, none bound)", g.Pods, g.Size)
	default:
		o.End = fmt.Sprintf("half-bound (%d of %d pods bound, %d Ready)", g.Bound, g.Size, g.Ready)
	}
	return o
}

// events since the scenario started, of the kinds that explain what happened to gangs and nodes
func (d *dayTwo) events(ctx context.Context, since time.Time) []EventView {
	evs, err := d.box.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []EventView
	for _, e := range evs.Items {
		t := e.LastTimestamp.Time
		if t.IsZero() {
			t = e.EventTime.Time
		}
		if t.Before(since.Add(-time.Second)) {
			continue
		}
		out = append(out, EventView{Object: e.InvolvedObject.Kind + " " + e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name,
			Type: e.Type, Reason: e.Reason, Message: e.Message, Source: e.Source.Component + e.ReportingController, Count: e.Count})
	}
	if len(out) > 150 {
		out = out[len(out)-150:]
	}
	return out
}

// toleration: how long a pod tolerates a NoExecute taint with this key: -1 forever, 0 not at all, else seconds.
func toleration(p corev1.Pod, key string) int64 {
	best := int64(0)
	for _, t := range p.Spec.Tolerations {
		if t.Effect != "" && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !(t.Key == key || (t.Key == "" && t.Operator == corev1.TolerationOpExists)) {
			continue
		}
		if t.TolerationSeconds == nil {
			return -1
		}
		if *t.TolerationSeconds > best {
			best = *t.TolerationSeconds
		}
	}
	return best
}

// A node fails in one of two ways, and the node lifecycle controller tells them apart by what the kubelet still sends
// (k8s.io/kubernetes@v1.33.13 pkg/controller/nodelifecycle/node_lifecycle_controller.go):
//   - it stops reporting (no Lease renewal, no NodeStatus): past --node-monitor-grace-period the controller writes
//     Ready=Unknown itself (tryUpdateNodeHealth :925-960) and taints the node node.kubernetes.io/unreachable:NoExecute
//     (processTaintBaseEviction :783-791, doNoExecuteTaintingPass :632-634); the box's nodeFailure;
//   - it keeps its Lease and reports Ready=False (a container runtime or network that is down): the Lease keeps the
//     node's probe time fresh (:915-923), so the controller keeps the kubelet's Ready=False and taints the node
//     node.kubernetes.io/not-ready:NoExecute (:773-782, :629-631); once the kubelet reports Ready again it removes
//     both taints (markNodeAsReachable :1244-1256, from processTaintBaseEviction :793-800); meanwhile its
//     node.kubernetes.io/not-ready:NoSchedule (doNoScheduleTaintingPass :527, the map at :84-91) keeps new pods off
//     it; the box's nodeNotReady (clusterbox --day-two-not-ready).
//
// The pods then go as their toleration of that taint allows (the taint-eviction controller), both ways.
type failureMode struct {
	what  string // the scenario's name, the prefix of its findings
	taint string // the NoExecute taint the node lifecycle controller puts on
	// notReady: the kubelet keeps its Lease and reports Ready=False; else it stops reporting
	notReady bool
}

var (
	stopsReporting  = failureMode{what: "node failure", taint: unreachableTaint}
	reportsNotReady = failureMode{what: "node not ready", taint: notReadyTaint, notReady: true}
)

func (d *dayTwo) nodeFailure(ctx context.Context, mode failureMode) error {
	t0 := time.Now()
	res := &FailureResult{}
	if mode.notReady {
		d.rep.NotReady = res
	} else {
		d.rep.Failure = res
	}
	defer func() { res.Seconds = time.Since(t0).Seconds(); res.Events = d.events(ctx, t0) }()
	victim, err := d.busiestGangNode(ctx, mode.what, " (its kubelet is not stopped by the box)")
	if err != nil || victim == "" {
		return err
	}
	res.Node = victim
	var node corev1.Node
	for _, n := range d.nodes {
		if n.Name == victim {
			node = n
		}
	}
	if mode.notReady {
		if err := d.kl.SetNotReady(ctx, victim); err != nil {
			return err
		}
		d.logf("day two: node %s reports Ready=False (its kubelet keeps renewing its Lease)", victim)
	} else {
		d.kl.Stop(victim)
		d.logf("day two: node %s stops its heartbeats", victim)
	}
	// the taint of the node lifecycle controller
	var taintedAt time.Time
	for deadline := time.Now().Add(nodeMonitorGrace + 30*time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		n, err := d.box.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, t := range n.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoExecute && (t.Key == unreachableTaint || t.Key == notReadyTaint) {
				res.Taint, taintedAt = t.Key+":NoExecute", time.Now()
			}
		}
		if res.Taint != "" {
			break
		}
	}
	if res.Taint == "" {
		how := "missed its heartbeats"
		if mode.notReady {
			how = "reported Ready=False"
		}
		d.finding("%s: %s %s for %s and the node lifecycle controller did not taint it NoExecute (grace period %s)",
			mode.what, victim, how, nodeMonitorGrace+30*time.Second, nodeMonitorGrace)
		if mode.notReady {
			return d.readyAgain(ctx, mode, victim, res, nil)
		}
		return d.repair(ctx, mode, node, res, nil)
	}
	res.TaintedAt = taintedAt.Sub(t0).Seconds()
	key := strings.TrimSuffix(res.Taint, ":NoExecute")
	if key != mode.taint {
		d.finding("%s: %s was tainted %s where the node lifecycle controller puts %s on a node that %s", mode.what,
			victim, res.Taint, mode.taint, map[bool]string{true: "keeps its Lease and reports Ready=False",
				false: "stops reporting"}[mode.notReady])
	}
	// each pod on it goes once its toleration of that taint runs out (the taint-eviction controller)
	pods, err := d.box.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + victim})
	if err != nil {
		return err
	}
	longest := time.Duration(0)
	for _, p := range pods.Items {
		if ownedByDaemonSet(p) {
			continue
		}
		tol := toleration(p, key)
		e := PodEviction{Pod: p.Namespace + "/" + p.Name, Gang: gangOf(p), Role: p.Labels["multinode.dev/role"],
			Toleration: fmt.Sprintf("%ds", tol)}
		switch {
		case tol < 0:
			e.Toleration = "forever"
		case time.Duration(tol)*time.Second > boxLongestToleration:
			d.rep.NotChecked = append(d.rep.NotChecked, fmt.Sprintf("%s: pod %s tolerates %s for %ds, longer "+
				"than the box waits (%s)", mode.what, e.Pod, key, tol, boxLongestToleration))
		case time.Duration(tol)*time.Second > longest:
			longest = time.Duration(tol) * time.Second
		}
		res.Pods = append(res.Pods, e)
	}
	// the longest finite toleration, the taint-eviction controller's slack; a pod tolerating forever waits as long
	wait := longest + 15*time.Second
	if wait < defaultTolerationSeconds+15*time.Second {
		wait = defaultTolerationSeconds + 15*time.Second
	}
	for deadline := taintedAt.Add(wait); ; time.Sleep(500 * time.Millisecond) {
		left := 0
		for i := range res.Pods {
			e := &res.Pods[i]
			if e.Marked {
				continue
			}
			ns, name, _ := strings.Cut(e.Pod, "/")
			p, err := d.box.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && (p.DeletionTimestamp != nil || p.Spec.NodeName != victim)) {
				e.Marked, e.After = true, time.Since(taintedAt).Seconds()
				continue
			}
			left++
		}
		if left == 0 || time.Now().After(deadline) {
			break
		}
	}
	state := "dead"
	if mode.notReady {
		state = "not-ready"
	}
	for _, e := range res.Pods {
		if e.Marked {
			continue
		}
		if e.Toleration == "forever" {
			d.finding("%s: pod %s (gang %s) tolerates %s without tolerationSeconds: it stays bound to the %s node "+
				"%s for ever and its gang never recovers (the pack allows at most 300 s: multinode/health.py)",
				mode.what, e.Pod, orNone(e.Gang), key, state, victim)
		} else {
			d.finding("%s: pod %s (toleration %s of %s) still on the %s node %s %.0fs after the taint",
				mode.what, e.Pod, e.Toleration, key, state, victim, wait.Seconds())
		}
	}
	if mode.notReady {
		// the node's kubelet still runs: it ends the evicted pods itself (the fake kubelet finishes their deletion)
		d.logf("day two: %s tainted %s after %.0fs; its pods gone as their tolerations allow", victim, res.Taint, res.TaintedAt)
	} else {
		// the cloud's node repair deletes the instance and its Node; pod GC then removes the pods bound to it
		if err := d.box.Client.CoreV1().Nodes().Delete(ctx, victim, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		d.kl.Forget(victim)
		for _, e := range res.Pods {
			ns, name, _ := strings.Cut(e.Pod, "/")
			err := d.box.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		d.logf("day two: %s tainted %s after %.0fs; its pods gone; node deleted (the cloud's repair)", victim, res.Taint, res.TaintedAt)
	}
	gs, _, err := d.waitGangs(ctx, boxRecover, false)
	if err != nil {
		return err
	}
	ended := map[string]bool{}
	for _, k := range keys(gs) {
		o := outcome(gs[k])
		// A gang that lost a pod of a role upgrades.json names in endsOn (a NIM MPIJob's launcher): the job ends for
		// good, nothing recreates it; judged after the repair (it must not come back whole)
		if by := d.model[gs[k].workload()].endsFor(lostRoles(res.Pods, k)); len(by) > 0 {
			o.Note = fmt.Sprintf("ended by the loss of its pod(s) of role(s) %s (upgrades.json endsOn)", strings.Join(by, ","))
			ended[k] = true
			res.GangsAfterLoss = append(res.GangsAfterLoss, o)
			continue
		}
		// A gang whose lost pods all have roles upgrades.json names in partialOn: only that part is replaced (a
		// Volcano job's worker -> RestartTask on the worker task; with a recoveryTimeout, any pod recreated alone
		// while the policy's action waits) and waits, half-bound, for a node beside the rest (in a real cluster
		// torchrun's rendezvous timeout may then fail the master: RestartJob). That is the rendering's promise
		// (manifests/workloads/volcano.py, upgrades.py restart_model), judged as such.
		if gs[k].halfBound() && d.model[gs[k].workload()].partialFor(lostRoles(res.Pods, k)) {
			o.Note = fmt.Sprintf("its lost pod(s) of role(s) %s replaced alone (upgrades.json partialOn), Pending for a "+
				"node beside the rest of the gang", strings.Join(lostRoles(res.Pods, k), ","))
			gs[k].Bound = 0 // not judged as half-bound below
		}
		res.GangsAfterLoss = append(res.GangsAfterLoss, o)
		if gs[k].halfBound() {
			d.finding("%s: gang %s %s %s after node %s was lost: a gang must come back whole or stay "+
				"whole-Pending", mode.what, k, o.End, boxRecover, victim)
		}
	}
	if mode.notReady {
		return d.readyAgain(ctx, mode, victim, res, ended)
	}
	return d.repair(ctx, mode, node, res, ended)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// repair: the cloud's node repair brings a node of the same name and shape back; every gang must be whole again.
func (d *dayTwo) repair(ctx context.Context, mode failureMode, node corev1.Node, res *FailureResult, ended map[string]bool) error {
	if _, err := d.box.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err == nil {
		if err := d.box.Client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		d.kl.Forget(node.Name)
		for i := 0; i < 20; i++ { // the Node object gone before it is registered again
			if _, err := d.box.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	n := node.DeepCopy()
	n.ResourceVersion, n.UID = "", ""
	if err := d.kl.AddNodes(ctx, []corev1.Node{*n}, 200); err != nil {
		return err
	}
	if err := d.copyCSINode(ctx, node.Name, node.Name); err != nil {
		return err
	}
	return d.judgeBack(ctx, mode, node.Name, "repaired", res, ended)
}

// readyAgain: the not-ready node's fault clears (its kubelet reports Ready again): the node lifecycle controller
// removes the not-ready taints, and every gang must be whole again.
func (d *dayTwo) readyAgain(ctx context.Context, mode failureMode, victim string, res *FailureResult, ended map[string]bool) error {
	if err := d.kl.SetReady(ctx, victim); err != nil {
		return err
	}
	var left []string
	for deadline := time.Now().Add(nodeMonitorGrace); ; time.Sleep(time.Second) {
		n, err := d.box.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		left = nil
		for _, t := range n.Spec.Taints {
			if t.Key == notReadyTaint || t.Key == unreachableTaint {
				left = append(left, t.Key+":"+string(t.Effect))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		d.finding("%s: %s reports Ready again and still carries %s %s later (the node lifecycle controller removes "+
			"them from a Ready node)", mode.what, victim, strings.Join(left, ", "), nodeMonitorGrace)
	}
	return d.judgeBack(ctx, mode, victim, "ready again", res, ended)
}

// judgeBack: the node is back (repaired, or ready again); every gang must be whole again, but one that upgrades.json
// says the loss ends (endsOn), which must hold no node.
func (d *dayTwo) judgeBack(ctx context.Context, mode failureMode, node, how string, res *FailureResult, ended map[string]bool) error {
	wait := d.recoverWait(ctx)
	gs, _, err := d.waitGangs(ctx, wait, true)
	if err != nil {
		return err
	}
	for _, k := range keys(gs) {
		o := outcome(gs[k])
		if ended[k] {
			d.ended = true
			if gs[k].whole() {
				d.finding("%s: gang %s is whole again after node %s was %s, where upgrades.json "+
					"predicts that the loss ends it (endsOn): %s", mode.what, k, node, how, d.onUpgrade(k))
			} else if msg := d.endedHolding(ctx, gs[k]); msg != "" {
				d.finding("%s: %s", mode.what, msg)
			} else {
				o.Note = "ended, not recreated, as upgrades.json predicts (endsOn); none of its pods holds a node"
			}
			res.GangsAfterRepair = append(res.GangsAfterRepair, o)
			continue
		}
		res.GangsAfterRepair = append(res.GangsAfterRepair, o)
		if !gs[k].whole() {
			d.finding("%s: gang %s is %s %s after the failed node %s was %s (the pool has its nodes "+
				"back: it must be whole)", mode.what, k, o.End, wait, node, how)
		}
	}
	return nil
}

// copyCSINode gives a node the CSINode (the stack's CSI drivers) another node has, when that one has one
// (volcano.go registerCSIDrivers).
func (d *dayTwo) copyCSINode(ctx context.Context, from, to string) error {
	src, err := d.box.Client.StorageV1().CSINodes().Get(ctx, from, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if from == to {
		// deleting the Node deletes its CSINode (owner reference) eventually: recreate it
		_ = d.box.Client.StorageV1().CSINodes().Delete(ctx, to, metav1.DeleteOptions{})
		time.Sleep(300 * time.Millisecond)
	}
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: to}}
	for _, dr := range src.Spec.Drivers {
		cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: dr.Name, NodeID: to})
	}
	if _, err := d.box.Client.StorageV1().CSINodes().Create(ctx, cn, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (d *dayTwo) setUnschedulable(ctx context.Context, name string, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
	_, err := d.box.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// poolOfNode: the pool prepare.py wrote on the node (box.multinode.dev/pool)
func poolOfNode(n corev1.Node) string {
	return n.Annotations["box.multinode.dev/pool"]
}

func (d *dayTwo) drain(ctx context.Context) error {
	t0 := time.Now()
	res := &DrainResult{DrainTimeout: boxDrainTimeout.String()}
	d.rep.Drain = res
	defer func() { res.Seconds = time.Since(t0).Seconds(); res.Events = d.events(ctx, t0) }()
	holding, _, err := d.gangNodes(ctx)
	if err != nil {
		return err
	}
	gs, _, err := d.gangs(ctx)
	if err != nil {
		return err
	}
	// the surge nodes: per pool that holds a gang, upgrades.json's surge (the largest gang when it names none)
	// nodes shaped like the pool's first node
	byName := map[string]corev1.Node{}
	for _, n := range d.nodes {
		byName[n.Name] = n
	}
	pools := map[string]bool{}
	for _, t := range holding {
		if p := poolOfNode(byName[t]); p != "" {
			pools[p] = true
		}
	}
	// every node of those pools is upgraded: EKS first marks all of them unschedulable (the scale-up phase's
	// eks.amazonaws.com/nodegroup=unschedulable:NoSchedule taint on every node without the new AMI), then evicts
	// the pods of one node at a time and terminates it; the Auto Scaling group launches its replacement
	// (docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html, scale-up and upgrade phases).
	// The box cordons them all, drains them one by one, and uncordons each drained node as its new replacement.
	var targets []string
	for _, n := range d.nodes {
		if pools[poolOfNode(n)] && !realNodeNames[n.Name] {
			if _, err := d.box.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
				targets = append(targets, n.Name)
			}
		}
	}
	sort.Strings(targets)
	var surge []corev1.Node
	for _, p := range d.up.Pools {
		if !pools[p.Pool] {
			continue
		}
		res.StackDrain = append(res.StackDrain, fmt.Sprintf("pool %s (%s): %s", p.Pool, p.Strategy, p.DrainWait))
		k := p.Surge
		if k <= 0 {
			k = p.LargestGang
		}
		var shape *corev1.Node
		for _, n := range d.nodes {
			if poolOfNode(n) == p.Pool {
				shape = n.DeepCopy()
				break
			}
		}
		if shape == nil {
			continue
		}
		for i := 0; i < k; i++ {
			n := shape.DeepCopy()
			from := n.Name
			n.Name, n.ResourceVersion, n.UID = fmt.Sprintf("%s-surge-%d", p.Pool, i), "", ""
			n.Labels = map[string]string{}
			for lk, lv := range shape.Labels {
				n.Labels[lk] = lv
			}
			if _, ok := n.Labels["kubernetes.io/hostname"]; ok {
				n.Labels["kubernetes.io/hostname"] = n.Name
			}
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations["multinode.dev/box-surge-of"] = from
			surge = append(surge, *n)
			res.SurgeNodes = append(res.SurgeNodes, n.Name)
		}
	}
	if len(surge) > 0 {
		if err := d.kl.AddNodes(ctx, surge, 100); err != nil {
			return err
		}
		for _, n := range surge {
			if err := d.copyCSINode(ctx, n.Annotations["multinode.dev/box-surge-of"], n.Name); err != nil {
				return err
			}
		}
	}
	surgeSet := map[string]bool{}
	for _, n := range res.SurgeNodes {
		surgeSet[n] = true
	}
	// per gang: the UIDs it started with, the Ready pods evicted since it was last whole
	prevUIDs := map[string]map[types.UID]bool{}
	outs := map[string]*GangOutcome{}
	evictedSinceWhole := map[string]int{}
	for k, g := range gs {
		prevUIDs[k] = g.uids
		outs[k] = &GangOutcome{Gang: k, PredictedAllowed: g.PredictedAllowed, PredictedUpgrade: g.PredictedUpgrade}
		for _, rg := range d.rep.Gangs {
			if rg.Gang == k {
				outs[k].PredictedAllowed, outs[k].PredictedUpgrade, outs[k].AllowedByBudget = rg.PredictedAllowed,
					rg.PredictedUpgrade, rg.Allowed
			}
		}
	}
	noteRestarts := func(now map[string]*GangView) map[string]string {
		kind := map[string]string{}
		for k, g := range now {
			prev, kept, fresh := prevUIDs[k], 0, 0
			for u := range g.uids {
				if prev[u] {
					kept++
				} else {
					fresh++
				}
			}
			if fresh > 0 && kept == 0 {
				outs[k].Restarts++
				kind[k] = "whole"
			} else if fresh > 0 {
				outs[k].PartialRestarts++
				kind[k] = "partial"
			}
			if g.whole() {
				evictedSinceWhole[k] = 0
			}
			prevUIDs[k] = g.uids
		}
		return kind
	}
	for _, node := range targets {
		if err := d.setUnschedulable(ctx, node, true); err != nil {
			return err
		}
	}
	endedBy := map[string]bool{} // gangs a drain ended as upgrades.json predicts (endsOn)
	for _, node := range targets {
		step := DrainStep{Node: node, LastRefusal: map[string]string{}}
		roles := map[string]map[string]bool{} // gang -> roles (multinode.dev/role) of its pods evicted here
		s0 := time.Now()
		for deadline := time.Now().Add(boxDrainTimeout); ; {
			cur, all, err := d.gangs(ctx)
			if err != nil {
				return err
			}
			for k, g := range cur {
				if g.whole() {
					evictedSinceWhole[k] = 0
				}
			}
			var left []string
			for _, p := range all {
				if p.Spec.NodeName != node || ownedByDaemonSet(p) || p.DeletionTimestamp != nil {
					continue
				}
				key := p.Namespace + "/" + p.Name
				ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
				err := d.box.Client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
				switch {
				case err == nil:
					step.Evicted = append(step.Evicted, key)
					if g := gangOf(p); g != "" {
						if roles[g] == nil {
							roles[g] = map[string]bool{}
						}
						roles[g][p.Labels["multinode.dev/role"]] = true
					}
					if g := gangOf(p); outs[g] != nil && podReady(p) {
						evictedSinceWhole[g]++
						if evictedSinceWhole[g] > outs[g].MostLostByEviction {
							outs[g].MostLostByEviction = evictedSinceWhole[g]
						}
					}
				case apierrors.IsNotFound(err):
				case apierrors.IsTooManyRequests(err):
					step.Refused++
					step.LastRefusal[key] = err.Error()
					left = append(left, key)
				default:
					var se *apierrors.StatusError
					if errors.As(err, &se) {
						step.Refused++
						step.LastRefusal[key] = err.Error()
						left = append(left, key)
					} else {
						return err
					}
				}
			}
			var terminating []string
			if len(left) == 0 {
				// every pod evicted: wait until none is left on the node (the fake kubelet finishes deletions)
				still, err := d.box.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
				if err != nil {
					return err
				}
				for _, p := range still.Items {
					if !ownedByDaemonSet(p) {
						terminating = append(terminating, p.Namespace+"/"+p.Name)
					}
				}
				if len(terminating) == 0 {
					step.Completed = true
					break
				}
			}
			// A drain waits for its evicted pods to be gone (kubectl drain, the clouds' drains: up to their timeout).
			// An evicted pod of a batch/v1 Job stays, terminating, until the Job controller has tracked it (its
			// batch.kubernetes.io/job-tracking finalizer), which the box saw take as long as the Job's pod-failure
			// backoff (10 s, 20 s, 40 s on torchrun-recipe's 2nd..4th eviction): with nothing refused, the box waits
			// for them as long as it waits for the gang (recoverWait), not only its drain timeout.
			if time.Now().After(deadline) && (len(left) > 0 || time.Since(s0) > d.recoverWait(ctx)) {
				step.Left = left
				if len(left) == 0 {
					step.Left = terminating
					for _, t := range terminating {
						step.LastRefusal[t] = "evicted, still terminating on the node"
					}
				}
				break
			}
			time.Sleep(time.Second)
		}
		step.Seconds = time.Since(s0).Seconds()
		if step.Completed {
			// terminated; its replacement (same shape, the new image) joins the pool
			if err := d.setUnschedulable(ctx, node, false); err != nil {
				return err
			}
		}
		r0 := time.Now()
		after, whole, err := d.waitGangs(ctx, d.recoverWait(ctx), true)
		if err != nil {
			return err
		}
		step.WholeAfter, step.Recovered = whole, time.Since(r0).Seconds()
		restarted := noteRestarts(after)
		for g, rs := range roles {
			o := outs[g]
			if o == nil {
				continue
			}
			if by := d.model[strings.SplitN(g, "/", 2)[0]].endsFor(keys(rs)); len(by) > 0 && !endedBy[g] {
				// the job ends for good (upgrades.json endsOn): nothing recreates it; judged at the end
				endedBy[g] = true
				o.Note = fmt.Sprintf("ended by the eviction of its pod(s) of role(s) %s from %s (upgrades.json endsOn)",
					strings.Join(by, ","), node)
			}
			if endedBy[g] {
				continue
			}
			// the restart the rendering promises for the pod evicted: a Volcano job's master -> the job whole
			// (RestartJob), an LWS group's pod -> the group whole (RecreateGroupOnPodRestart)
			wantWhole := d.model[strings.SplitN(g, "/", 2)[0]].wholeOn(rs)
			if wantWhole && restarted[g] != "whole" {
				d.finding("drain: gang %s: pod(s) of role(s) %s evicted from %s and the gang's restart was %q, where "+
					"upgrades.json predicts a whole restart: %s", g, strings.Join(keys(rs), ","), node,
					orNone(restarted[g]), o.PredictedUpgrade)
			}
		}
		d.logf("day two: drain of %s: %d evicted, %d refusals, completed=%v in %.0fs; gangs whole=%v after %.0fs",
			node, len(step.Evicted), step.Refused, step.Completed, step.Seconds, whole, step.Recovered)
		if !step.Completed {
			var why []string
			for _, l := range step.Left {
				why = append(why, l+": "+step.LastRefusal[l])
			}
			budgets, _ := budgetViews(ctx, d.box)
			var bs []string
			for _, b := range budgets {
				if b.DisruptionsAllowed == 0 {
					var conds []string
					for _, c := range b.Conditions {
						conds = append(conds, c.Type+"="+string(c.Status)+" "+c.Reason+": "+c.Message)
					}
					bs = append(bs, fmt.Sprintf("%s/%s disruptionsAllowed 0 (%s)", b.Namespace, b.Name, strings.Join(conds, "; ")))
				}
			}
			d.finding("drain: node %s still holds %d pod(s) after %s of evictions although the pool has %d surge "+
				"node(s) to take them: %s; budgets: %s", node, len(step.Left), time.Since(s0).Round(time.Second), len(surge),
				strings.Join(why, " | "), strings.Join(bs, " | "))
		}
		res.Steps = append(res.Steps, step)
	}
	final, _, err := d.gangs(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys(outs) {
		o := outs[k]
		g := final[k]
		end := outcome(g)
		o.End, o.NodesAtEnd = end.End, g.Nodes
		if len(g.Nodes) > 0 {
			o.OnSurgeNodes = true
			for _, n := range g.Nodes {
				o.OnSurgeNodes = o.OnSurgeNodes && surgeSet[n]
			}
		}
		allowed := 1
		if o.AllowedByBudget != nil {
			allowed = int(*o.AllowedByBudget)
		}
		if o.PredictedAllowed != nil {
			allowed = *o.PredictedAllowed
		}
		if o.MostLostByEviction > allowed && (o.AllowedByBudget != nil || o.PredictedAllowed != nil) {
			d.finding("drain: gang %s lost %d Ready pods to evictions before it was whole again; its budget allows %d",
				k, o.MostLostByEviction, allowed)
		}
		switch {
		case endedBy[k] && g.whole():
			d.finding("drain: gang %s is whole after the drain, where upgrades.json predicts that the eviction of its "+
				"pod ends it (endsOn): %s", k, o.PredictedUpgrade)
		case endedBy[k]:
			if msg := d.endedHolding(ctx, g); msg != "" {
				d.finding("drain: %s", msg)
			}
		case !g.whole():
			d.finding("drain: gang %s is %s after the pool's gang nodes were drained with %d surge node(s) added",
				k, o.End, len(surge))
		}
		// how many restarts upgrades.json allows (restartsAtMost: a Volcano job 2, worker task then the job; with a
		// recoveryTimeout one single-pod replacement per node; else once)
		most := d.model[strings.SplitN(k, "/", 2)[0]].most
		if most < 1 {
			most = 1
		}
		if n := o.Restarts + o.PartialRestarts; n > most && o.PredictedUpgrade != "" {
			d.finding("drain: gang %s restarted %d times (%d whole, %d partial) where upgrades.json predicts at most %d "+
				"(surge %d node(s)): %s", k, n, o.Restarts, o.PartialRestarts, most, len(surge), o.PredictedUpgrade)
		}
		res.Gangs = append(res.Gangs, *o)
	}
	return nil
}

func (g GangView) workload() string { return strings.SplitN(g.Gang, "/", 2)[0] }

// lostRoles: the roles (multinode.dev/role) of the gang's pods on the lost node
func lostRoles(pods []PodEviction, gang string) []string {
	seen := map[string]bool{}
	for _, e := range pods {
		if e.Gang == gang {
			seen[e.Role] = true
		}
	}
	return keys(seen)
}

// rerunBatch deletes the played batch object and applies it again, then waits (bounded) until its gang is whole: the
// next scenario (`next`) judges a fresh run. A Volcano Job counts every restart against its maxRetry over its life
// (RetryCount; at maxRetry it is Failed: volcano.sh/volcano@v1.14.1 pkg/controllers/job/state/restarting.go:35,
// running.go:38-44), and a job that ended (upgrades.json endsOn) is not recreated by its controller.
func (d *dayTwo) rerunBatch(ctx context.Context, next string) error {
	d.ended = false
	if d.played == nil {
		return nil
	}
	t1 := time.Now()
	if err := d.ap.Delete(ctx, *d.played); err != nil {
		return err
	}
	d.ap.WaitGone(ctx, d.box, d.played.Key(), 30*time.Second)
	if err := d.ap.Apply(ctx, *d.played, 20*time.Second); err != nil {
		return err
	}
	if _, _, err := Settle(ctx, d.box, d.quiet/2, d.settle, 2*time.Second); err != nil {
		return err
	}
	// whole before the scenario is played (bounded): a quiet box is not yet a job whose pods exist (seen on
	// volcano-llm-training: the job applied again after the cordon had no pod 7 s later)
	if _, whole, err := d.waitGangs(ctx, boxRecover, true); err != nil {
		return err
	} else if !whole {
		d.rep.NotChecked = append(d.rep.NotChecked, fmt.Sprintf("%s: %s applied again was not whole within %s: "+
			"the scenario is judged from that state", next, d.played.Key(), boxRecover))
	}
	d.logf("day two: %s run again for the %s in %.0fs", d.played.Key(), next, time.Since(t1).Seconds())
	return nil
}

// onUpgrade: upgrades.json's onUpgrade of a gang (its workload's)
func (d *dayTwo) onUpgrade(gang string) string {
	for _, g := range d.rep.Gangs {
		if g.Gang == gang {
			return g.PredictedUpgrade
		}
	}
	return ""
}

// endedHolding: a gang that ended for good (upgrades.json endsOn) must not keep pods bound: nothing replaces or
// removes them (a NIM MPIJob with cleanPodPolicy None keeps its workers Running after the job failed,
// kubeflow/mpi-operator@v0.8.0 pkg/controller/mpi_job_controller.go:625-633), they hold their GPU nodes, and the
// gang's budget (minAvailable over pods nobody recreates) then refuses every drain of those nodes. "" when none is
// bound; else the finding, with the budget's count.
func (d *dayTwo) endedHolding(ctx context.Context, g *GangView) string {
	if g.Bound == 0 {
		return ""
	}
	var bs []string
	if budgets, err := budgetViews(ctx, d.box); err == nil {
		for _, b := range budgets {
			for _, pn := range b.Pods {
				if strings.HasPrefix(pn, g.workload()) {
					bs = append(bs, fmt.Sprintf("%s/%s disruptionsAllowed %d", b.Namespace, b.Name, b.DisruptionsAllowed))
					break
				}
			}
		}
	}
	return fmt.Sprintf("gang %s ended (upgrades.json endsOn) and %d of its pods still hold node(s) %s %s later: "+
		"nothing replaces or removes them, and a budget over pods nobody recreates refuses their drain (%s)",
		g.Gang, g.Bound, strings.Join(g.Nodes, ", "), boxRecover, orNone(strings.Join(bs, "; ")))
}
