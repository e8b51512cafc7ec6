package main

// Volcano's scheduler and controller-manager (their own commands, built by conformance/volcano's module) run
// outside the cluster as child processes on loopback, the way the chart runs them (volcano v1.15.1
// installer/helm/chart/volcano/templates/scheduler.yaml:203-225, controllers.yaml:175-195) less what needs a
// pod: --kubeconfig instead of the in-cluster config, --leader-elect=false (one replica; both commands then
// run without a lease: cmd/scheduler/app/server.go:99-101, cmd/controller-manager/app/server.go:80-83),
// --scheduler-conf a file instead of the mounted ConfigMap. Their health and metrics servers stay off (off by
// default, options.go): nothing listens. The controller-manager reads its HyperNode discovery config from the
// ConfigMap the chart would make (pkg/controllers/hypernode/configmap_handler.go:34-45), created here from
// engines/cluster/volcano.json (prepare.py --volcano, volcano_inputs.py).
// The box calls it only when --volcano names a directory holding both binaries (conformance/volcano builds them:
// v1.14.1 with volcano.sh/apis v1.14.0, its README says why).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// The PodGroups of every phase are listed by lws.go's Applier.PodGroups (compare.py reads their conditions).
var (
	queueGVR     = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
	hyperNodeGVR = schema.GroupVersionResource{Group: "topology.volcano.sh", Version: "v1alpha1", Resource: "hypernodes"}
)

// VolcanoInputs is engines/cluster/volcano.json (volcano_inputs.py).
type VolcanoInputs struct {
	Release             string           `json:"release"`
	Namespace           string           `json:"namespace"`
	ChartVersion        string           `json:"chartVersion"`
	SchedulerConf       string           `json:"schedulerConf"`
	SchedulerConfSource string           `json:"schedulerConfSource"`
	ControllerConfigMap corev1.ConfigMap `json:"controllerConfigMap"`
}

type Volcano struct {
	procs []*exec.Cmd
}

// StartVolcano starts vc-controller-manager and vc-scheduler from binDir; (nil, nil) when the stack installs no
// Volcano (no volcano.json). Ready when the scheduler has created the default Queue and the controller-manager's
// queue controller has opened it (pkg/scheduler/cache/cache.go:464-520; the enqueue action admits only into an
// open queue).
func StartVolcano(ctx context.Context, b *Box, binDir, boxIn string, logf func(string, ...any)) (*Volcano, error) {
	data, err := os.ReadFile(filepath.Join(boxIn, "volcano.json"))
	if os.IsNotExist(err) {
		logf("volcano: the stack installs no Volcano (no volcano.json)")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var in VolcanoInputs
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("volcano.json: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in.Namespace}}
	if _, err := b.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	cm := in.ControllerConfigMap
	if _, err := b.Client.CoreV1().ConfigMaps(in.Namespace).Create(ctx, &cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("volcano controller ConfigMap: %w", err)
	}
	if err := registerCSIDrivers(ctx, b, filepath.Dir(filepath.Dir(boxIn)), logf); err != nil {
		return nil, err
	}
	conf := filepath.Join(b.Dir, "volcano-scheduler.conf")
	if err := os.WriteFile(conf, []byte(in.SchedulerConf), 0o600); err != nil {
		return nil, err
	}
	v := &Volcano{}
	common := []string{"--kubeconfig=" + b.Kubeconfig, "--leader-elect=false", "--logtostderr", "-v=3"}
	env := append(os.Environ(), "KUBE_POD_NAMESPACE="+in.Namespace, "HELM_RELEASE_NAME="+in.Release)
	for _, c := range []struct {
		bin, log string
		args     []string
	}{
		{"vc-controller-manager", "volcano-controller-manager.log", nil},
		{"vc-scheduler", "volcano-scheduler.log", []string{"--scheduler-conf=" + conf, "--cache-dumper=false"}},
	} {
		logPath := filepath.Join(boxIn, c.log)
		log, err := os.Create(logPath)
		if err != nil {
			v.Stop()
			return nil, err
		}
		cmd := exec.Command(filepath.Join(binDir, c.bin), append(append([]string{}, common...), c.args...)...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			v.Stop()
			return nil, fmt.Errorf("%s: %w", c.bin, err)
		}
		v.procs = append(v.procs, cmd)
		logf("volcano: %s started (pid %d, log %s)", c.bin, cmd.Process.Pid, logPath)
	}
	exited := make(chan error, len(v.procs))
	for _, p := range v.procs {
		go func(p *exec.Cmd) { exited <- fmt.Errorf("%s exited: %v", filepath.Base(p.Path), p.Wait()) }(p)
	}
	dyn := dynamic.NewForConfigOrDie(b.Config)
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			v.Stop()
			return nil, fmt.Errorf("volcano: %v (logs in %s)", err, boxIn)
		case <-ctx.Done():
			v.Stop()
			return nil, ctx.Err()
		default:
		}
		if q, err := dyn.Resource(queueGVR).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			if state, _, _ := unstructuredString(q.Object, "status", "state"); state == "Open" {
				boxSchedulers["volcano"] = true // Settle now waits for the pods Volcano schedules too
				logf("volcano: ready (queue default Open; scheduler conf from %s; chart %s)", in.SchedulerConfSource,
					in.ChartVersion)
				if err := settleHyperNodes(ctx, dyn, logf); err != nil {
					v.Stop()
					return nil, err
				}
				return v, nil
			}
		}
		time.Sleep(time.Second)
	}
	v.Stop()
	return nil, fmt.Errorf("volcano: the default queue was not created and opened within 120s (logs in %s)", boxIn)
}

// registerCSIDrivers gives every node a CSINode naming the CSI drivers of the stack's PersistentVolumes, as the
// real kubelet does once a CSI node plugin (the FSx/EFS/... driver's DaemonSet of the cluster) registers: Volcano
// counts each CSI volume of a pod as an attachable-volumes-csi-<driver> request and admits it only where a node's
// CSINode names that driver (volcano v1.14.1 pkg/scheduler/cache/event_handlers.go:141-160, 1320-1330); without
// a CSINode the default queue is "overused" by that resource and nothing is allocated. No attach limit is
// claimed (allocatable unset: "unattachable", unlimited), which the box cannot know.
func registerCSIDrivers(ctx context.Context, b *Box, stackDir string, logf func(string, ...any)) error {
	files, _ := filepath.Glob(filepath.Join(stackDir, "k8s", "PersistentVolume-*.yaml")) // PersistentVolumeClaim-* too: kind checked below
	// and the driver of the box's own stand-in PVs for claims of a StorageClass (main.go waitClaimsBound)
	drivers := map[string]bool{standInCSIDriver: true}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var pv corev1.PersistentVolume
		if err := yaml.Unmarshal(data, &pv); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if pv.Kind != "PersistentVolume" {
			continue
		}
		if pv.Spec.CSI != nil && pv.Spec.CSI.Driver != "" {
			drivers[pv.Spec.CSI.Driver] = true
		}
	}
	nodes, err := b.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var names []string
	for d := range drivers {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, n := range nodes.Items {
		cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
		for _, d := range names {
			cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: d, NodeID: n.Name})
		}
		if _, err := b.Client.StorageV1().CSINodes().Create(ctx, cn, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("CSINode %s: %w", n.Name, err)
		}
	}
	logf("volcano: CSINodes for %d nodes with the stack's CSI drivers %v (no attach limit)", len(nodes.Items), names)
	return nil
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

func (v *Volcano) Stop() {
	if v == nil {
		return
	}
	for _, p := range v.procs {
		if p.Process == nil {
			continue
		}
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range v.procs {
		for p.ProcessState == nil && time.Now().Before(deadline) {
			if err := syscall.Kill(p.Process.Pid, 0); err != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
	}
}

// settleHyperNodes waits until the HyperNodes Volcano's label discovery makes from the nodes' topology labels stop
// changing, and repairs one race of that discovery. It names a HyperNode from its informer's cache: an existing
// HyperNode with the same label value is reused, else a new random name is drawn (volcano v1.14.1
// pkg/controllers/hypernode/discovery/label/label.go:423-460). Every node add queues a discovery round
// (label.go:295-300), so when the controller starts with the nodes already there a second round can run before the
// cache holds the first round's HyperNodes, and it creates a second HyperNode for the same domain; the scheduler then
// refuses the member's second parent ("already has a parent ... cannot set another parent", seen in CI on aws-dev)
// and a job with a hard networkTopology stays Pending. A real cluster can hit the same race when its controller
// starts (or many nodes join at once); the box keeps, for each member claimed twice, the parent whose name sorts
// first (the one the discoverer reuses: label.go:435-443) and deletes the others, which queues a fresh discovery
// round (label.go:320-336), then waits again. Each repair is printed.
func settleHyperNodes(ctx context.Context, dyn dynamic.Interface, logf func(string, ...any)) error {
	const quiet, limit = 5 * time.Second, 45 * time.Second
	for round := 1; round <= 4; round++ {
		var items []map[string]any
		last, since, deadline := "", time.Now(), time.Now().Add(limit)
		for {
			list, err := dyn.Resource(hyperNodeGVR).List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("volcano: list HyperNodes: %w", err)
			}
			items = items[:0]
			var keys []string
			for _, it := range list.Items {
				items = append(items, it.Object)
				keys = append(keys, it.GetName()+"@"+it.GetResourceVersion())
			}
			sort.Strings(keys)
			if k := fmt.Sprint(keys); k != last {
				last, since = k, time.Now()
			} else if time.Since(since) >= quiet {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("volcano: the HyperNodes kept changing for %s", limit)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
		extra := duplicateParents(items)
		if len(extra) == 0 {
			if len(items) > 0 {
				logf("volcano: %d HyperNodes discovered from the nodes' labels, each member in one parent", len(items))
			}
			return nil
		}
		logf("volcano: HyperNode discovery made a second parent for the same members (its naming race, volcano "+
			"v1.14.1 discovery/label/label.go:423-460); deleting %v, Volcano discovers again (round %d)", extra, round)
		for _, name := range extra {
			if err := dyn.Resource(hyperNodeGVR).Delete(ctx, name, metav1.DeleteOptions{}); err != nil &&
				!apierrors.IsNotFound(err) {
				return fmt.Errorf("volcano: delete HyperNode %s: %w", name, err)
			}
		}
	}
	return fmt.Errorf("volcano: HyperNodes still name a member twice after 4 repairs")
}

// duplicateParents returns the HyperNodes to delete so that no member (a node or a HyperNode, by exact name) is
// claimed by two HyperNodes: for each member claimed more than once, every claimant but the first by name.
func duplicateParents(items []map[string]any) []string {
	parents := map[string][]string{}
	for _, it := range items {
		md, _ := it["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		spec, _ := it["spec"].(map[string]any)
		members, _ := spec["members"].([]any)
		for _, m := range members {
			mm, _ := m.(map[string]any)
			typ, _ := mm["type"].(string)
			sel, _ := mm["selector"].(map[string]any)
			exact, _ := sel["exactMatch"].(map[string]any)
			if member, ok := exact["name"].(string); ok && member != "" {
				parents[typ+"/"+member] = append(parents[typ+"/"+member], name)
			}
		}
	}
	drop := map[string]bool{}
	for _, ps := range parents {
		if len(ps) < 2 {
			continue
		}
		sort.Strings(ps)
		for _, p := range ps[1:] {
			drop[p] = true
		}
	}
	out := make([]string, 0, len(drop))
	for p := range drop {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
