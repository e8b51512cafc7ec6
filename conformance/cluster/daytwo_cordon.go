package main

// Day two, scenario 3 (issue 44): a bad GPU node is cordoned, as NVSentinel's fault quarantine does with its default
// rule sets (cordon only: docs/node-health.md) or as the cloud's repair does before it replaces a node. Expected, as
// docs/node-health.md says:
//   - kube-controller-manager's node lifecycle controller adds node.kubernetes.io/unschedulable:NoSchedule to the
//     cordoned node (k8s.io/kubernetes@v1.33.13 pkg/controller/nodelifecycle/node_lifecycle_controller.go
//     doNoScheduleTaintingPass, the taint for spec.unschedulable);
//   - the gang pods running there keep running (NoSchedule evicts nothing);
//   - the release health gate (the product's own code, health_gate.py, against this API server) refuses to promote
//     while the pool has more unhealthy nodes than spare nodes (upgrades.json spareNodes) and passes otherwise;
//   - when the fault ends the rank on that node (its pod deleted, as the process's exit ends it), the gang's
//     controller replaces it and no new pod lands on the cordoned node (kube-scheduler's and Volcano's
//     NodeUnschedulable filter: volcano.sh/volcano@v1.14.1 pkg/scheduler/plugins/predicates/predicates.go:433-437):
//     the gang is whole elsewhere when the pool has room, or whole-Pending, never half-bound (except the part
//     upgrades.json's partialOn says is replaced alone);
//   - once the node is uncordoned (repaired, the quarantine lifted) every gang is whole again.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const unschedulableTaint = "node.kubernetes.io/unschedulable"

// GateCheck: one run of the release health gate with some nodes of a pool cordoned.
type GateCheck struct {
	Pool      string   `json:"pool"`
	Cordoned  []string `json:"cordoned"`
	Spare     int      `json:"spareNodes"` // upgrades.json
	Unhealthy int      `json:"unhealthyCounted"`
	Pass      bool     `json:"pass"`
	Want      bool     `json:"wantPass"` // cordoned <= spare
	Message   string   `json:"message"`
}

type CordonResult struct {
	Node        string        `json:"node"`
	Pool        string        `json:"pool,omitempty"`
	Taint       string        `json:"taint,omitempty"`
	TaintedAt   float64       `json:"taintedAfterSeconds,omitempty"`
	KeptRunning []string      `json:"runningPodsKept"`
	Evicted     []string      `json:"runningPodsEvicted,omitempty"`
	Gate        []GateCheck   `json:"healthGate,omitempty"`
	Failed      string        `json:"podEndedByTheFault,omitempty"`
	FailedHow   string        `json:"howTheRankEnded,omitempty"`
	NewOnNode   []string      `json:"newPodsOnCordonedNode,omitempty"`
	GangsAfter  []GangOutcome `json:"gangsAfterRestart"`
	GangsBack   []GangOutcome `json:"gangsAfterUncordon"`
	Events      []EventView   `json:"events,omitempty"`
	Seconds     float64       `json:"seconds"`
}

// The release health gate's limits. What it does is fixed: Python starts, imports multinode and the kubernetes
// client, reads the stack file and plans its pools (spare nodes), lists the nodes once from the box's API server and
// prints the verdict: 1.8 s of CPU measured here (idle machine, `/usr/bin/time -v`, user 1.67 s + sys 0.09 s). Its
// wall time is that CPU divided by the share of the 2 cores it gets: at load average 22-27 it passed the 90 s wall
// limit it had and was killed (nim-lws, a finding of the box's, not of the gate). So it is bounded by the CPU it
// uses, which the load does not change: gateCPULimit, 16 times the measured 1.8 s (a gate that computes that long is
// broken), and, for a request that never returns (no CPU used), gateWallLimit, within the day-two box's 12 minutes.
var (
	gateCPULimit  = 30 * time.Second
	gateWallLimit = 5 * time.Minute
	gatePoll      = 250 * time.Millisecond
)

// clockTicks: the unit of utime/stime in /proc/<pid>/stat (USER_HZ, 100 on Linux: proc(5))
const clockTicks = 100

// procCPU: the CPU time (user + system) a process has used so far, from /proc/<pid>/stat (its fields 14 and 15,
// counted after the command name, which may hold spaces and parentheses: proc(5)).
func procCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %.80q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15
	if len(f) < 13 {
		return 0, fmt.Errorf("too few fields in %.80q", stat)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("utime/stime %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// overLimit: why a command that has used `cpu` of CPU in `wall` of wall time is stopped; "" while within its limits.
func overLimit(cpu, wall, cpuLimit, wallLimit time.Duration) string {
	switch {
	case cpu > cpuLimit:
		return fmt.Sprintf("stopped after %s of CPU (limit %s) in %s", cpu.Round(10*time.Millisecond), cpuLimit,
			wall.Round(time.Second))
	case wall > wallLimit:
		return fmt.Sprintf("stopped after %s of wall time (limit %s) with %s of CPU", wall.Round(time.Second),
			wallLimit, cpu.Round(10*time.Millisecond))
	}
	return ""
}

// runLimited runs a shell command (exec'd, so the process watched is the command itself) and returns its stdout; it
// is killed once it passes cpuLimit of CPU time or wallLimit of wall time (overLimit).
func runLimited(ctx context.Context, command string, cpuLimit, wallLimit time.Duration) ([]byte, error) {
	cmd := exec.Command("sh", "-c", "exec "+command)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stat := fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)
	tick := time.NewTicker(gatePoll)
	defer tick.Stop()
	why, ctxDone := "", ctx.Done()
	for {
		select {
		case err := <-done:
			if why != "" {
				return nil, fmt.Errorf("%s %s", why, strings.TrimSpace(stderr.String()))
			}
			if err != nil {
				return nil, fmt.Errorf("%v %s", err, strings.TrimSpace(stderr.String()))
			}
			return []byte(stdout.String()), nil
		case <-ctxDone:
			ctxDone = nil // closed: not selected again
			if why == "" {
				why = "stopped: " + ctx.Err().Error()
				_ = cmd.Process.Kill()
			}
		case <-tick.C:
			if why != "" {
				continue
			}
			var cpu time.Duration
			if b, err := os.ReadFile(stat); err == nil {
				cpu, _ = procCPU(string(b))
			}
			if why = overLimit(cpu, time.Since(start), cpuLimit, wallLimit); why != "" {
				_ = cmd.Process.Kill()
			}
		}
	}
}

// runGate runs the health gate command with the box's kubeconfig and returns the pool's verdict.
func (d *dayTwo) runGate(ctx context.Context, pool string) (*GateCheck, error) {
	out, err := runLimited(ctx, d.gate+" "+d.box.Kubeconfig, gateCPULimit, gateWallLimit)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", d.gate, err)
	}
	var pools []struct {
		Pool      string              `json:"pool"`
		Unhealthy map[string][]string `json:"unhealthy"`
		Pass      bool                `json:"pass"`
		Message   string              `json:"message"`
	}
	if err := json.Unmarshal(out, &pools); err != nil {
		return nil, fmt.Errorf("%s printed no verdict: %v (%.200s)", d.gate, err, out)
	}
	for _, p := range pools {
		if p.Pool == pool {
			return &GateCheck{Pool: pool, Unhealthy: len(p.Unhealthy), Pass: p.Pass, Message: p.Message}, nil
		}
	}
	return nil, fmt.Errorf("%s: no verdict for pool %s", d.gate, pool)
}

func (d *dayTwo) spareOf(pool string) (int, bool) {
	for _, p := range d.up.Pools {
		if p.Pool == pool {
			return p.SpareNodes, true
		}
	}
	return 0, false
}

func (d *dayTwo) gateCheck(ctx context.Context, res *CordonResult, cordoned []string) error {
	spare, _ := d.spareOf(res.Pool)
	g, err := d.runGate(ctx, res.Pool)
	if err != nil {
		d.finding("cordon: the release health gate did not run: %v", err)
		return nil
	}
	g.Cordoned, g.Spare, g.Want = append([]string(nil), cordoned...), spare, len(cordoned) <= spare
	res.Gate = append(res.Gate, *g)
	if g.Unhealthy != len(cordoned) {
		d.finding("cordon: the release health gate counted %d unhealthy node(s) in pool %s with %d cordoned (%s): %s",
			g.Unhealthy, res.Pool, len(cordoned), strings.Join(cordoned, ", "), g.Message)
	}
	if g.Pass != g.Want {
		verb := map[bool]string{true: "promotes", false: "refuses"}
		d.finding("cordon: the release health gate %s with %d cordoned node(s) in pool %s of %d spare (it must "+
			"refuse while more nodes are unhealthy than spares): %s", verb[g.Pass], len(cordoned), res.Pool, spare,
			g.Message)
	}
	return nil
}

func (d *dayTwo) cordon(ctx context.Context) error {
	t0 := time.Now()
	victim, err := d.busiestGangNode(ctx, "cordon", "")
	if err != nil || victim == "" {
		return err
	}
	res := &CordonResult{Node: victim}
	d.rep.Cordon = res
	defer func() { res.Seconds = time.Since(t0).Seconds(); res.Events = d.events(ctx, t0) }()
	for _, n := range d.nodes {
		if n.Name == victim {
			res.Pool = poolOfNode(n)
		}
	}
	before, err := d.box.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + victim})
	if err != nil {
		return err
	}
	running := map[types.UID]string{}
	var onNode []corev1.Pod
	for _, p := range before.Items {
		if gangOf(p) != "" && p.DeletionTimestamp == nil && !ownedByDaemonSet(p) {
			running[p.UID] = p.Namespace + "/" + p.Name
			onNode = append(onNode, p)
		}
	}
	sort.Slice(onNode, func(i, j int) bool { return onNode[i].Name < onNode[j].Name })
	// the quarantine: cordon (spec.unschedulable), nothing else
	if err := d.setUnschedulable(ctx, victim, true); err != nil {
		return err
	}
	d.logf("day two: node %s cordoned (a bad GPU node quarantined)", victim)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && res.Taint == ""; time.Sleep(500 * time.Millisecond) {
		n, err := d.box.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, t := range n.Spec.Taints {
			if t.Key == unschedulableTaint {
				res.Taint, res.TaintedAt = t.Key+":"+string(t.Effect), time.Since(t0).Seconds()
			}
		}
	}
	if res.Taint == "" {
		d.finding("cordon: %s cordoned for 20s and the node lifecycle controller did not taint it %s:NoSchedule "+
			"(docs/node-health.md)", victim, unschedulableTaint)
	}
	// NoSchedule evicts nothing: the running gang pods stay (a few seconds of watching: the taint-eviction
	// controller acts at once on a NoExecute taint a pod does not tolerate)
	time.Sleep(5 * time.Second)
	for uid, key := range running {
		ns, name, _ := strings.Cut(key, "/")
		p, err := d.box.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.UID != uid || p.DeletionTimestamp != nil {
			res.Evicted = append(res.Evicted, key)
		} else {
			res.KeptRunning = append(res.KeptRunning, key)
		}
	}
	sort.Strings(res.Evicted)
	sort.Strings(res.KeptRunning)
	if len(res.Evicted) > 0 {
		d.finding("cordon: pod(s) %s left the cordoned node %s: a cordon (NoSchedule) evicts nothing "+
			"(docs/node-health.md)", strings.Join(res.Evicted, ", "), victim)
	}
	// the release health gate: one cordoned node, then (a pool with spares) one more than its spares
	if d.gate == "" {
		d.rep.NotChecked = append(d.rep.NotChecked, "cordon: the release health gate (clusterbox --health-gate not given)")
	} else {
		if err := d.gateCheck(ctx, res, []string{victim}); err != nil {
			return err
		}
		if spare, ok := d.spareOf(res.Pool); ok && spare >= 1 {
			extra := []string{}
			for _, n := range d.nodes {
				if poolOfNode(n) == res.Pool && n.Name != victim && len(extra) < spare && !realNodeNames[n.Name] {
					extra = append(extra, n.Name)
				}
			}
			if len(extra) == spare {
				for _, n := range extra {
					if err := d.setUnschedulable(ctx, n, true); err != nil {
						return err
					}
				}
				if err := d.gateCheck(ctx, res, append([]string{victim}, extra...)); err != nil {
					return err
				}
				for _, n := range extra {
					if err := d.setUnschedulable(ctx, n, false); err != nil {
						return err
					}
				}
			}
		}
	}
	// the fault ends the rank on the bad node (endRank: the process exits as the kubelet would report it); the
	// gang's controller replaces it, and no new pod may land on the cordoned node
	endedGang := ""
	if len(onNode) == 0 {
		d.rep.NotChecked = append(d.rep.NotChecked, "cordon: no gang pod on the cordoned node to fail")
	} else {
		p := onNode[0]
		res.Failed = p.Namespace + "/" + p.Name
		how, err := d.endRank(ctx, p)
		if err != nil {
			return err
		}
		res.FailedHow = how
		gs, _, err := d.waitGangs(ctx, boxRecover, false)
		if err != nil {
			return err
		}
		_, pods, err := d.gangs(ctx)
		if err != nil {
			return err
		}
		for _, q := range pods {
			if q.Spec.NodeName == victim && q.DeletionTimestamp == nil && gangOf(q) != "" && running[q.UID] == "" {
				res.NewOnNode = append(res.NewOnNode, q.Namespace+"/"+q.Name)
			}
		}
		sort.Strings(res.NewOnNode)
		if len(res.NewOnNode) > 0 {
			d.finding("cordon: new pod(s) %s placed on the cordoned node %s after the gang's pod there failed: a "+
				"quarantined node must keep new gang pods off (a toleration of %s?)", strings.Join(res.NewOnNode, ", "),
				victim, unschedulableTaint)
		}
		failedGang := gangOf(p)
		for _, k := range keys(gs) {
			o := outcome(gs[k])
			if by := d.model[gs[k].workload()].endsFor([]string{p.Labels["multinode.dev/role"]}); k == failedGang && len(by) > 0 {
				// its controller does not recreate it (upgrades.json endsOn): judged once the node is uncordoned
				o.Note = fmt.Sprintf("ended by the loss of its pod of role %s (upgrades.json endsOn)", by[0])
				endedGang = k
			} else if k == failedGang && gs[k].halfBound() && d.model[gs[k].workload()].partialFor([]string{p.Labels["multinode.dev/role"]}) {
				o.Note = fmt.Sprintf("its failed pod of role %s replaced alone (upgrades.json partialOn), Pending for a "+
					"node beside the rest of the gang", p.Labels["multinode.dev/role"])
			} else if gs[k].halfBound() {
				d.finding("cordon: gang %s %s %s after its pod %s on the cordoned node %s failed: a gang must come back "+
					"whole or stay whole-Pending", k, o.End, boxRecover, res.Failed, victim)
			}
			res.GangsAfter = append(res.GangsAfter, o)
		}
	}
	// the node repaired, the quarantine lifted
	if err := d.setUnschedulable(ctx, victim, false); err != nil {
		return err
	}
	wait := d.recoverWait(ctx)
	gs, _, err := d.waitGangs(ctx, wait, true)
	if err != nil {
		return err
	}
	for _, k := range keys(gs) {
		o := outcome(gs[k])
		if k == endedGang {
			d.ended = true
			if gs[k].whole() {
				d.finding("cordon: gang %s is whole again after its pod on the cordoned node %s failed, where "+
					"upgrades.json predicts that the loss ends it (endsOn): %s", k, victim, d.onUpgrade(k))
			} else if msg := d.endedHolding(ctx, gs[k]); msg != "" {
				d.finding("cordon: %s", msg)
			} else {
				o.Note = "ended, not recreated, as upgrades.json predicts (endsOn)"
			}
			res.GangsBack = append(res.GangsBack, o)
			continue
		}
		res.GangsBack = append(res.GangsBack, o)
		if !gs[k].whole() {
			d.finding("cordon: gang %s is %s %s after the cordoned node %s was uncordoned (it must be whole)", k, o.End,
				wait, victim)
		}
	}
	return nil
}

// endRank: the fault ends the rank's process on the cordoned node, as the node's kubelet would report it. A pod whose
// restartPolicy restarts a failed container (Always: LeaderWorkerSet pods, from their StatefulSets; OnFailure) gets
// its container restarted in place: the kubelet counts the restart and keeps the pod (k8s.io/kubernetes@v1.33.13
// pkg/kubelet/container/helpers.go:76-110 ShouldContainerBeRestarted, pkg/kubelet/kuberuntime/
// kuberuntime_container.go:220-224 restartCount + 1). That restart is what LWS's RecreateGroupOnPodRestart acts on
// (sigs.k8s.io/lws@v0.9.0 pkg/controllers/pod_controller.go:204-264, pkg/utils/pod/pod_utils.go:29-50: a restarted
// container or a pod being deleted); a pod deleted at once (grace period 0) is neither, so LWS never saw the fault and
// the worker's StatefulSet replaced the worker alone beside its leader, a half-bound group no real kubelet would
// cause. A pod that never restarts its containers (Never: Volcano, Job and MPIJob pods) is deleted with a grace period
// of 0, which its controller treats as the end of the pod (a Volcano job's PodEvicted / PodFailed policies name the
// same action; the Job controller counts a deleted pod as failed: docs/day-two.md).
func (d *dayTwo) endRank(ctx context.Context, p corev1.Pod) (string, error) {
	if p.Spec.RestartPolicy == corev1.RestartPolicyNever || len(p.Spec.Containers) == 0 {
		err := d.box.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return "", err
		}
		return "deleted (restartPolicy Never: the pod ends with its process)", nil
	}
	for try := 0; ; try++ {
		q, err := d.box.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if q.UID != p.UID {
			return "", fmt.Errorf("pod %s/%s was replaced before its rank ended", p.Namespace, p.Name)
		}
		restarted(q, time.Now())
		_, err = d.box.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{})
		if err == nil {
			return fmt.Sprintf("container %s exited 1 and was restarted by the kubelet (restartPolicy %s)",
				q.Spec.Containers[0].Name, q.Spec.RestartPolicy), nil
		}
		if !apierrors.IsConflict(err) || try >= 5 {
			return "", err
		}
	}
}

// restarted: the pod's first container as the kubelet reports it after the process exited 1 and the container was
// started again: restartCount + 1, the exit in lastState, running since now.
func restarted(q *corev1.Pod, now time.Time) {
	name := q.Spec.Containers[0].Name
	for i := range q.Status.ContainerStatuses {
		cs := &q.Status.ContainerStatuses[i]
		if cs.Name != name {
			continue
		}
		started := metav1.NewTime(now)
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt
		}
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
			Reason: "Error", StartedAt: started, FinishedAt: metav1.NewTime(now)}}
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}
		cs.RestartCount++
		return
	}
	q.Status.ContainerStatuses = append(q.Status.ContainerStatuses, corev1.ContainerStatus{Name: name,
		Image: q.Spec.Containers[0].Image, Ready: true, Started: ptr.To(true), RestartCount: 1,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}})
}
