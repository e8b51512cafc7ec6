// Command clusterbox: a Kubernetes control plane on loopback (embedded etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler of k8s.io/kubernetes, a fake kubelet of ours) that applies one
// stack's rendered objects (build/<stack>/k8s) on the stack's nodes and records what the real controllers and
// scheduler made of them (build/<stack>/engines/cluster/observed.json). The verdict (cluster.json) is the
// compare command's, run with the box still up so that --keep can leave a failing box running.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// Kinds whose pods run to completion: placement.json places each of them beside the long-running services,
// one at a time (multinode/placement.py "each batch job must fit beside them"), so the box does the same.
var batchKinds = map[string]bool{"batch/Job": true, "batch.volcano.sh/Job": true, "kubeflow.org/MPIJob": true,
	"kubeflow.org/PyTorchJob": true, "trainer.kubeflow.org/TrainJob": true}

var kyvernoBin, volcanoDir, lwsBin, mpiBin string
var playDayTwo bool

// healthGateCmd: the release health gate day two runs against the box (health_gate.py <stack file>; daytwo_cordon.go)
var healthGateCmd string

// dayTwoBatch: the batch gang (workload) day two plays beside the services; "" the first of the stack (daytwo.go)
var dayTwoBatch string

// upCmd: the command run in place of applying the stack's objects (conformance/pulumi rollout_up.py: the first
// `pulumi up` of the stack on the real engine); the box applies only the stack's CRDs and starts its add-ons' controllers
var upCmd, rolloutUpCmd string

// dayTwoNotReady: day two also plays a node whose kubelet keeps its Lease and reports Ready=False (daytwo.go)
var dayTwoNotReady bool

// real nodes (realnode.go): their names, the stand-in rootfs tar and the stand-in commands' folder
var realNodeNames = map[string]bool{}
var standinRootfs, standinDir string

// the CSI driver of the box's stand-in PersistentVolumes (waitClaimsBound)
const standInCSIDriver = "box.multinode.dev"

type Applied struct {
	File       string `json:"file"`
	APIVersion string `json:"apiVersion"`
	Object     string `json:"object"`
	Result     string `json:"result"` // applied | refused | not-served
	Error      string `json:"error,omitempty"`
}

type Phase struct {
	Name    string      `json:"name"`
	Objects []string    `json:"objects"`
	Settled bool        `json:"settled"`
	Seconds float64     `json:"seconds"`
	Pods    []PodView   `json:"pods"`
	Events  []EventView `json:"events"`
	Deleted *bool       `json:"deleted,omitempty"`
	Applied []Applied   `json:"applied"`
	// Volcano PodGroups as the box holds them (LWS creates one per group; lws.go PodGroups)
	PodGroups []map[string]any `json:"podGroups,omitempty"`
	// PodDisruptionBudgets with the disruption controller's status once the phase's pods are bound (budgets.go)
	Budgets []BudgetView `json:"budgets,omitempty"`
	// Services with their owners (LWS's headless Service per set, budgets.go serviceViews)
	Services []ServiceView `json:"services,omitempty"`
	// on real nodes: each ClusterIP Service port selecting their pods, dialled from a client pod (svcconn.go)
	ServiceConns []ServiceConn `json:"serviceConnections,omitempty"`
}

type Observed struct {
	Stack      string            `json:"stack"`
	Versions   map[string]string `json:"versions"`
	Nodes      []string          `json:"nodes"`
	Phases     []Phase           `json:"phases"`
	Error      string            `json:"error,omitempty"`
	Seconds    float64           `json:"seconds"`
	Kubeconfig string            `json:"kubeconfig"`
	// the box's network namespace when it started (only loopback) and at the end (with what the box made)
	Netns    *NetnsView `json:"netns,omitempty"`
	NetnsEnd *NetnsView `json:"netnsEnd,omitempty"`
	// real nodes (realnode.go)
	RealNodes []RealNodeView `json:"realNodes,omitempty"`
	// processes of the real nodes' pods still running once the nodes were stopped (StopRealNodes): must be none
	RealNodeLeftovers []string `json:"realNodeLeftovers,omitempty"`
	// the folder with the whole log of every container the real kubelets ran (podlogs.go)
	PodLogs string `json:"podLogs,omitempty"`
	// with real nodes: the stack's workload ConfigMaps as the pods left them at the end of the run (a verdict
	// written through the API server: apiservice.go configMapViews)
	ConfigMaps    []ConfigMapView `json:"configMaps,omitempty"`
	ImagesSkipped []string        `json:"imagesSkipped,omitempty"`
	// gangs on real nodes (gangs.go): the bound on the wait for their verdicts, and the images given the Ray layer
	GangTimeout float64  `json:"gangTimeout,omitempty"`
	RayImages   []string `json:"rayImages,omitempty"`
	// the images given the PyTorch layer, and the box-only cap on torchrun's --nproc_per_node in them (0: none)
	TorchImages   []string `json:"torchImages,omitempty"`
	TorchNprocMax int      `json:"torchNprocMax,omitempty"`
	// the box's registry on the real nodes (registry.go)
	Registry *RegistryView `json:"registry,omitempty"`
	// the real nodes' tmpfs: its size and its use (nodestmpfs.go)
	NodesTmpfs *NodesTmpfsView `json:"nodesTmpfs,omitempty"`
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "kubelet":
			os.Exit(kubeletMain(os.Args[2:]))
		case "node-ns":
			os.Exit(nodeNS(os.Args[2:]))
		case "kube-proxy":
			os.Exit(proxyMain(os.Args[2:]))
		}
	}
	stackDir := flag.String("stack-dir", "", "build/<stack> (reads k8s/, writes engines/cluster/)")
	timeout := flag.Duration("timeout", 6*time.Minute, "the whole run of this stack, control plane start included")
	settle := flag.Duration("settle", 90*time.Second, "longest wait for the pods of one phase to be bound or unschedulable")
	quiet := flag.Duration("quiet", 8*time.Second, "how long nothing may change before a phase counts as settled")
	keep := flag.Bool("keep", false, "on a failed verdict keep the box running (kubeconfig printed) until interrupted")
	compare := flag.String("compare", "", "verdict command run with the box up (its exit code is this command's)")
	kyverno := flag.String("kyverno", "", "Kyverno's admission controller binary (conformance/kyverno); empty: no Kyverno")
	volcano := flag.String("volcano", "", "directory with vc-scheduler and vc-controller-manager (conformance/volcano); empty: no Volcano")
	lws := flag.String("lws", "", "the LeaderWorkerSet controller manager binary (conformance/lws); empty: no LWS")
	mpi := flag.String("mpi-operator", "", "the MPI operator's controller (conformance/mpi-operator), started for a stack with an MPIJob; empty: none")
	netns := flag.Bool("netns", false, "run the whole box in a network namespace of its own (only loopback; needs root)")
	realNodes := flag.String("real-nodes", "", "comma-separated nodes of nodes.yaml run by a real kubelet with containerd (needs --netns)")
	rootfs := flag.String("standin-rootfs", "", "the stand-in images' root filesystem tar (conformance/realnode/rootfs.sh)")
	standin := flag.String("standin-dir", "", "conformance/realnode/standin (the stand-in commands)")
	dayTwo := flag.Bool("day-two", false, "after the phases, play a node failure, a cordoned bad node, a model rollout and a pool upgrade (daytwo.go); writes <stack-dir>/day-two.json")
	dayTwoB := flag.String("day-two-batch", "", "day two: the batch gang (its workload) played beside the services; empty: the stack's first batch gang")
	dayTwoNR := flag.Bool("day-two-not-ready", false, "day two: after the node that stops reporting, play a node that keeps its Lease and reports Ready=False (the not-ready taint)")
	up := flag.String("up", "", "run this command (BOX_KUBECONFIG in its environment) in place of applying the stack's objects: the box applies only the stack's CRDs, starts the add-ons' controllers, runs it, and records one phase \"up\" (conformance/pulumi/rollout_up.py: `pulumi up` on the real engine)")
	rolloutUp := flag.String("day-two-rollout-up", "", "day two plays only the model rollout, the changed LeaderWorkerSet sent by this command (BOX_KUBECONFIG in its environment: the second `pulumi up`, of the stack with the image changed) in place of the box's server-side apply (daytwo_rollout.go)")
	healthGate := flag.String("health-gate", "", "day two: the release health gate command, run with the box's kubeconfig as its last argument (health_gate.py <stack file>)")
	coredns := flag.String("coredns", "", "CoreDNS (conformance/coredns), serving cluster.local to the real nodes' pods; empty: no cluster DNS")
	rayLayer := flag.String("ray-layer", "", "the stand-in images' Ray layer (conformance/realnode/ray-layer.sh), for the images whose pods run Ray")
	gangWait := flag.Duration("gang-timeout", gangTimeout, "longest wait, after a phase settled, for the verdict of a gang on real nodes")
	torchLayer := flag.String("torch-layer", "", "the stand-in images' PyTorch layer (conformance/realnode/torch-layer.sh), for the images whose containers launch torchrun")
	flag.IntVar(&nodesTmpfsGiB, "nodes-tmpfs-gib", 0, "size of the real nodes' tmpfs in GiB (0: 1 GiB + 2 GiB a node, at most MemAvailable - 4 GiB, at least 8 GiB)")
	flag.IntVar(&torchNprocMax, "torch-nproc-max", 0, "box-only cap on torchrun's --nproc_per_node in the PyTorch images (0: none; recorded in observed.json)")
	flag.Parse()
	if *netns && os.Getenv(inNetnsEnv) == "" {
		os.Exit(reexecInNetns())
	}
	if *realNodes != "" && os.Getenv(inNetnsEnv) == "" {
		fmt.Fprintln(os.Stderr, "clusterbox: --real-nodes needs --netns (real nodes and their pods live only in the box's network namespace)")
		os.Exit(2)
	}
	for _, n := range strings.Split(*realNodes, ",") {
		if n = strings.TrimSpace(n); n != "" {
			realNodeNames[n] = true
		}
	}
	standinRootfs, standinDir, corednsBin = *rootfs, *standin, *coredns
	rayLayerTar, gangTimeout, torchLayerTar = *rayLayer, *gangWait, *torchLayer
	kyvernoBin, volcanoDir, lwsBin, mpiBin = *kyverno, *volcano, *lws, *mpi
	playDayTwo = *dayTwo
	healthGateCmd = *healthGate
	upCmd, rolloutUpCmd = *up, *rolloutUp
	dayTwoBatch = *dayTwoB
	dayTwoNotReady = *dayTwoNR
	if *stackDir == "" {
		fmt.Fprintln(os.Stderr, "usage: clusterbox --stack-dir build/<stack> [--compare 'cmd ...'] [--keep]")
		os.Exit(2)
	}
	os.Exit(run(*stackDir, *timeout, *settle, *quiet, *keep, *compare))
}

// What boxRun started that must outlive it until the --compare command has run (Kyverno).
var stopAfterCompare []func()

func run(stackDir string, timeout, settle, quiet time.Duration, keep bool, compare string) int {
	start := time.Now()
	boxIn := filepath.Join(stackDir, "engines", "cluster")
	logf := func(f string, a ...any) {
		fmt.Printf("[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(f, a...))
	}
	logFile, err := os.Create(filepath.Join(boxIn, "components.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer logFile.Close()
	// The components log through klog: all of it to components.log, nothing to the terminal (klog also copies
	// ERROR lines to stderr unless stderrthreshold is raised).
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	_ = kfs.Set("logtostderr", "false")
	_ = kfs.Set("alsologtostderr", "false")
	_ = kfs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(logFile)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() { <-sigs; cancel() }()

	dir, err := os.MkdirTemp("", "multinode-box-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// a report of an earlier run must not be read as this run's (compare.py --day-two reads it)
	_ = os.Remove(filepath.Join(stackDir, "day-two.json"))
	obs := Observed{Stack: filepath.Base(stackDir), Versions: map[string]string{
		"k8s.io/kubernetes": kubeletVersion, "go.etcd.io/etcd/server/v3": "v3.5.21 (k8s v1.33.13's pin)"}}
	if os.Getenv(inNetnsEnv) != "" {
		v, err := setupNetns()
		if err != nil {
			fmt.Fprintln(os.Stderr, "box: network namespace:", err)
			return 3
		}
		obs.Netns = &v
		logf("in a network namespace of its own (%s; the host's is %s): links %d, routes %d, default route %v",
			v.Inode, v.HostInode, len(v.Links), len(v.Routes), v.DefaultRoute)
	}
	code := func() int {
		var box *Box
		for attempt := 1; ; attempt++ {
			// Each attempt gets its own directory and context: a failed attempt's components stop with it.
			adir := filepath.Join(dir, fmt.Sprintf("try%d", attempt))
			actx, acancel := context.WithCancel(ctx)
			b, err := StartBox(actx, adir, logf)
			if err == nil {
				box = b
				defer acancel()
				break
			}
			if b != nil {
				b.Close()
			}
			acancel()
			if attempt < 3 && bindFailure(err) && ctx.Err() == nil {
				logf("control plane: %v; again on other ports (attempt %d of 3)", err, attempt+1)
				time.Sleep(time.Second)
				continue
			}
			obs.Error = "control plane: " + err.Error()
			fmt.Fprintln(os.Stderr, "box:", obs.Error, "(components' log "+logFile.Name()+")")
			if werr := writeJSON(filepath.Join(boxIn, "observed.json"), obs); werr != nil {
				fmt.Fprintln(os.Stderr, werr)
			}
			return 3
		}
		defer box.Close()
		obs.Kubeconfig = box.Kubeconfig
		if err := boxRun(ctx, box, stackDir, boxIn, settle, quiet, &obs, logf); err != nil {
			obs.Error = err.Error()
		}
		if len(obs.RealNodeLeftovers) > 0 {
			// a process of a pod that outlives its node is an error of the box (StopRealNodes)
			msg := fmt.Sprintf("%d processes of pods still run after the real nodes stopped: %s", len(obs.RealNodeLeftovers),
				strings.Join(obs.RealNodeLeftovers, ", "))
			obs.Error = strings.TrimPrefix(obs.Error+"; "+msg, "; ")
		}
		if obs.Netns != nil {
			if v, err := ReadNetns(); err == nil {
				obs.NetnsEnd = &v
			}
		}
		obs.Seconds = time.Since(start).Seconds()
		if err := writeJSON(filepath.Join(boxIn, "observed.json"), obs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		code := 0
		if obs.Error != "" {
			fmt.Fprintln(os.Stderr, "box:", obs.Error)
			code = 3
		}
		if compare != "" {
			c := exec.Command("sh", "-c", compare)
			c.Stdout, c.Stderr = os.Stdout, os.Stderr
			if err := c.Run(); err != nil {
				code = 1
				if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 1 {
					code = ee.ExitCode()
				}
			}
		}
		defer func() {
			for _, stop := range stopAfterCompare {
				stop()
			}
		}()
		if code != 0 {
			fmt.Fprintf(os.Stderr, "box of %s: kubeconfig %s (components' log %s)\n", obs.Stack, box.Kubeconfig, logFile.Name())
			if keep {
				fmt.Fprintln(os.Stderr, "--keep: the box keeps running; interrupt (Ctrl-C) to stop it")
				<-sigs
			}
		}
		return code
	}()
	cancel()
	time.Sleep(2 * time.Second) // let the components see the cancelled context before etcd closes
	if !keep || code == 0 {
		t0 := time.Now()
		os.RemoveAll(dir)
		logf("run folder removed in %.1fs", time.Since(t0).Seconds())
	}
	logf("done in %.1fs, exit %d", time.Since(start).Seconds(), code)
	return code
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func boxRun(ctx context.Context, box *Box, stackDir, boxIn string, settle, quiet time.Duration, obs *Observed,
	logf func(string, ...any)) error {
	var nodes corev1.NodeList
	data, err := os.ReadFile(filepath.Join(boxIn, "nodes.yaml"))
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, &nodes); err != nil {
		return fmt.Errorf("nodes.yaml: %w", err)
	}
	var fake, real []corev1.Node
	for _, n := range nodes.Items {
		if realNodeNames[n.Name] {
			real = append(real, n)
		} else {
			fake = append(fake, n)
		}
	}
	if len(real) != len(realNodeNames) {
		return fmt.Errorf("--real-nodes names %d nodes, nodes.yaml has %d of them", len(realNodeNames), len(real))
	}
	kl := &FakeKubelet{client: box.Client, logf: logf}
	if err := kl.RegisterNodes(ctx, fake); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		obs.Nodes = append(obs.Nodes, n.Name)
	}
	kl.Run(ctx)
	logf("%d nodes registered (fake kubelet)", len(fake))

	objects, err := ReadObjects(filepath.Join(stackDir, "k8s"))
	if err != nil {
		return err
	}
	if len(real) > 0 {
		for k, v := range realNodeVersions() {
			obs.Versions[k] = v
		}
		if corednsBin != "" {
			obs.Versions["coredns"] = CoreDNSVersion(corednsBin)
		}
		archive := ""
		if standinRootfs != "" {
			archive = filepath.Join(box.Dir, "standin-images.tar")
			t0 := time.Now()
			if rayLayerTar != "" {
				rayRefs = RayRefs(objects)
				for r := range rayRefs {
					obs.RayImages = append(obs.RayImages, r)
				}
				sort.Strings(obs.RayImages)
			}
			if torchLayerTar != "" {
				torchRefs = TorchRefs(objects)
				for r := range torchRefs {
					obs.TorchImages = append(obs.TorchImages, r)
				}
				sort.Strings(obs.TorchImages)
				obs.TorchNprocMax = torchNprocMax
			}
			obs.GangTimeout = gangTimeout.Seconds()
			skipped, err := WriteStandInArchive(archive, standinRootfs, standinDir, ImageRefs(objects))
			if err != nil {
				return fmt.Errorf("stand-in images: %w", err)
			}
			obs.ImagesSkipped = skipped
			logf("stand-in image archive written in %.1fs (%d references skipped)", time.Since(t0).Seconds(), len(skipped))
		}
		nodeHostPaths = HostPaths(objects)
		drivers := CSIDrivers(objects)
		if err := EnsureCSIDrivers(ctx, box.Client, drivers); err != nil {
			return err
		}
		rns, err := StartRealNodes(ctx, box, real, archive, boxIn, drivers, logf)
		if err == nil {
			// every container's whole log, kept under the stack's folder (podlogs.go)
			var srcs []string
			for _, rn := range rns {
				srcs = append(srcs, filepath.Join(rn.dir, "pod-logs"))
			}
			obs.PodLogs = filepath.Join(stackDir, "pod-logs")
			if err = startLogMirror(obs.PodLogs, filepath.Join(realNodesMount, "kept-logs"), srcs); err != nil {
				err = fmt.Errorf("the pods' logs: %w", err)
			}
		}
		defer func() {
			// what the pods wrote into their ConfigMaps, to the last (the NCCL check writes its verdict as its
			// pods are deleted at the end of its phase)
			cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
			if cms, cerr := configMapViews(cctx, box); cerr == nil {
				obs.ConfigMaps = cms
			}
			ccancel()
			stopLogMirror()
			t0 := time.Now()
			seen, left := StopRealNodes(rns)
			obs.RealNodeLeftovers = left
			obs.NodesTmpfs = nodesTmpfsView
			logf("real nodes stopped in %.1fs (%d processes of pods ended, %d left)", time.Since(t0).Seconds(), seen,
				len(left))
		}()
		defer func() {
			for _, rn := range rns {
				obs.RealNodes = append(obs.RealNodes, rn.View)
			}
			obs.Registry = boxRegistry.View()
		}()
		if err != nil {
			return err
		}
	}
	// CRDs: build/<stack>/k8s holds digests (multinode/plan.py _crd_digest); crds.yaml holds the full upstream
	// CRDs (same name, spec checked against the digest's sha256 by prepare.py) and those of the add-ons the box
	// runs in place of their Helm charts.
	var crds struct {
		Replace map[string]map[string]any `json:"replace"`
		Extra   []map[string]any          `json:"extra"`
	}
	data, err = os.ReadFile(filepath.Join(boxIn, "crds.yaml"))
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, &crds); err != nil {
		return fmt.Errorf("crds.yaml: %w", err)
	}
	ap := NewApplier(box)
	services := Phase{Name: "services"}
	applyOne := func(ph *Phase, o Object) {
		err := ap.Apply(ctx, o, 20*time.Second)
		a := Applied{File: filepath.Base(o.File), APIVersion: o.U.GetAPIVersion(), Object: o.Key(), Result: "applied"}
		switch {
		case err == nil:
		case strings.Contains(err.Error(), "no matches for kind"):
			a.Result, a.Error = "not-served", err.Error()
		default:
			a.Result, a.Error = "refused", err.Error()
		}
		ph.Applied = append(ph.Applied, a)
		ph.Objects = append(ph.Objects, o.Key())
	}
	for _, c := range crds.Extra {
		applyOne(&services, Object{File: "crds.yaml", U: &unstructured.Unstructured{Object: c}})
	}
	if kyvernoBin != "" {
		k, err := StartKyverno(ctx, box, kyvernoBin, filepath.Join(boxIn, "kyverno.log"), logf)
		if err != nil {
			return err
		}
		// stopped after the --compare command (run()), not here: a verdict command such as conformance/pulumi's
		// e2e (`pulumi up` of the fabric policies) needs Kyverno's webhooks serving while it runs
		stopAfterCompare = append(stopAfterCompare, k.Stop)
		ap.kyverno, ap.kyvernoURL = true, k.URL
		obs.Versions["kyverno"] = kyvernoBin
	}
	if volcanoDir != "" {
		v, err := StartVolcano(ctx, box, volcanoDir, boxIn, logf)
		if err != nil {
			return err
		}
		if v != nil {
			defer v.Stop()
			obs.Versions["volcano"] = volcanoDir
		}
	}
	if mpiBin != "" && hasKind(objects, "kubeflow.org", "MPIJob") {
		gang := ""
		if volcanoDir != "" && obs.Versions["volcano"] != "" {
			gang = "volcano" // the stacks' MPIJobs are for an operator run with --gang-scheduling=volcano
		}
		m, err := StartMPIOperator(ctx, box, mpiBin, gang, filepath.Join(boxIn, "mpi-operator.log"), logf)
		if err != nil {
			return err
		}
		defer m.Stop()
		obs.Versions["mpi-operator"] = ModuleVersion(mpiBin, "github.com/kubeflow/mpi-operator")
	}
	lwsValues, lwsInstalled, err := ReadLWSValues(stackDir)
	if err != nil {
		return err
	}
	var batch []Object
	for _, o := range objects {
		if upCmd != "" && o.U.GetKind() != "CustomResourceDefinition" {
			continue // the command creates them (--up)
		}
		if lwsBin != "" && lwsInstalled && o.U.GetKind() != "CustomResourceDefinition" {
			// the chart installed before the workloads, once the stack's CRDs (LWS's among them) are established
			l, err := StartLWS(ctx, box, lwsBin, lwsValues, filepath.Join(boxIn, "lws.log"), logf)
			if err != nil {
				return err
			}
			defer l.Stop()
			obs.Versions["lws"] = LWSVersion(lwsBin)
			lwsInstalled = false
		}
		if o.U.GetKind() == "CustomResourceDefinition" {
			full, ok := crds.Replace[o.U.GetName()]
			if !ok {
				return fmt.Errorf("%s: no full CRD for the digest %s in crds.yaml", o.File, o.U.GetName())
			}
			o.U = &unstructured.Unstructured{Object: full}
		}
		gvk := o.U.GroupVersionKind()
		if batchKinds[gvk.Group+"/"+gvk.Kind] {
			batch = append(batch, o)
			continue
		}
		applyOne(&services, o)
	}
	if upCmd != "" {
		if lwsBin != "" && lwsInstalled {
			l, err := StartLWS(ctx, box, lwsBin, lwsValues, filepath.Join(boxIn, "lws.log"), logf)
			if err != nil {
				return err
			}
			defer l.Stop()
			obs.Versions["lws"] = LWSVersion(lwsBin)
		}
		services.Name = "up"
		t0 := time.Now()
		if err := runBoxCommand(ctx, box, upCmd, nil); err != nil {
			return fmt.Errorf("--up command: %w", err)
		}
		logf("--up command done in %.0fs", time.Since(t0).Seconds())
	}
	logf("services phase: %d objects applied, %d batch objects held back", len(services.Objects), len(batch))
	for _, m := range standInSecrets(ctx, box, objects) {
		services.Applied = append(services.Applied, Applied{File: "-", Object: "Secret", Result: "stand-in", Error: m})
	}
	standIns, err := waitClaimsBound(ctx, box, 60*time.Second)
	for _, m := range standIns {
		services.Applied = append(services.Applied, Applied{File: "-", Object: "PersistentVolume", Result: "stand-in", Error: m})
	}
	if err != nil {
		services.Applied = append(services.Applied, Applied{File: "-", Object: "PersistentVolumeClaims", Result: "refused",
			Error: err.Error()})
	}
	snap := func(ph *Phase) error {
		trackPods(true) // the phase's real-node pods, for those deleted before the snapshot (podlogs.go)
		defer trackPods(false)
		ok, took, err := Settle(ctx, box, quiet, settle, 3*time.Second)
		if err != nil {
			return err
		}
		ph.Settled, ph.Seconds = ok, took.Seconds()
		waitGangs(ctx, box, logf) // a settled phase runs its pods; their gangs may still be forming (gangs.go)
		ph.Pods, ph.Events, err = ap.Snapshot(ctx, box)
		if err == nil {
			ph.PodGroups = ap.PodGroups(ctx)
			// the disruption controller recounts a budget on every pod change: wait (bounded) until it has
			// written a status for the bound pods and nothing changed for 3 s (budgets.go WaitBudgets)
			ph.Budgets, err = WaitBudgets(ctx, box, 3*time.Second, 30*time.Second)
		}
		if err == nil {
			ph.Services, err = serviceViews(ctx, box)
		}
		if err == nil {
			// real nodes: every ClusterIP Service port that selects their pods, dialled from a client pod (svcconn.go)
			ph.ServiceConns, err = CheckServiceConns(ctx, box, ph.Pods)
		}

		logf("phase %q: %d pods, settled=%v after %.0fs", ph.Name, len(ph.Pods), ok, took.Seconds())
		return err
	}
	if err := snap(&services); err != nil {
		return err
	}
	obs.Phases = append(obs.Phases, services)
	for _, o := range batch {
		ph := Phase{Name: "batch " + o.Key()}
		applyOne(&ph, o)
		if err := snap(&ph); err != nil {
			return err
		}
		if err := ap.Delete(ctx, o); err != nil {
			return fmt.Errorf("delete %s: %w", o.Key(), err)
		}
		t0 := time.Now()
		gone := ap.WaitGone(ctx, box, o.Key(), 60*time.Second)
		ph.Deleted = &gone
		logf("%s deleted, its pods gone=%v after %.0fs", o.Key(), gone, time.Since(t0).Seconds())
		obs.Phases = append(obs.Phases, ph)
	}
	if playDayTwo {
		t0 := time.Now()
		rep, err := RunDayTwo(ctx, box, kl, ap, stackDir, nodes.Items, objects, batch, healthGateCmd, quiet, settle, logf)
		if err != nil {
			rep.Findings = append(rep.Findings, "day two: "+err.Error())
		}
		logf("day two: %d findings, %.1fs", len(rep.Findings), time.Since(t0).Seconds())
		if werr := writeJSON(filepath.Join(stackDir, "day-two.json"), rep); werr != nil {
			return werr
		}
	}
	return nil
}

// runBoxCommand runs a command of the box's caller by `sh -c` with the box's kubeconfig in BOX_KUBECONFIG, its output
// to this process's stdout and to out (when given)
func runBoxCommand(ctx context.Context, box *Box, cmd string, out io.Writer) error {
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.Env = append(os.Environ(), "BOX_KUBECONFIG="+box.Kubeconfig)
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	if out != nil {
		c.Stdout, c.Stderr = io.MultiWriter(os.Stdout, out), io.MultiWriter(os.Stderr, out)
	}
	return c.Run()
}

// hasKind: does the stack hold an object of this group and kind (a controller is started only for its objects)
func hasKind(objects []Object, group, kind string) bool {
	for _, o := range objects {
		gvk := o.U.GroupVersionKind()
		if gvk.Group == group && gvk.Kind == kind {
			return true
		}
	}
	return false
}

// waitClaimsBound waits until every PersistentVolumeClaim is Bound (the stacks bind static PVs by volumeName). A
// claim for dynamic provisioning (a StorageClass, no volumeName: the cluster's own class, e.g. existing-dev's
// efs-sc) gets a stand-in PV of ours pre-bound to it (no provisioner runs in the box); each is reported.
func waitClaimsBound(ctx context.Context, box *Box, limit time.Duration) ([]string, error) {
	deadline := time.Now().Add(limit)
	var standIns []string
	made := map[string]bool{}
	for {
		pvcs, err := box.Client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return standIns, err
		}
		var unbound []string
		for _, c := range pvcs.Items {
			if c.Status.Phase == corev1.ClaimBound {
				continue
			}
			unbound = append(unbound, c.Namespace+"/"+c.Name+" "+string(c.Status.Phase))
			key := c.Namespace + "/" + c.Name
			if c.Spec.VolumeName == "" && c.Spec.StorageClassName != nil && *c.Spec.StorageClassName != "" && !made[key] {
				pv := &corev1.PersistentVolume{
					ObjectMeta: metav1.ObjectMeta{Name: "box-" + c.Namespace + "-" + c.Name},
					Spec: corev1.PersistentVolumeSpec{
						Capacity:                      corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]},
						AccessModes:                   c.Spec.AccessModes,
						StorageClassName:              *c.Spec.StorageClassName,
						ClaimRef:                      &corev1.ObjectReference{Namespace: c.Namespace, Name: c.Name},
						PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
						PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
							Driver: standInCSIDriver, VolumeHandle: key}},
					}}
				if _, err := box.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
					return standIns, fmt.Errorf("stand-in PV for %s: %w", key, err)
				}
				made[key] = true
				standIns = append(standIns, fmt.Sprintf("PersistentVolumeClaim %s (StorageClass %s): bound to a stand-in PV of the box (no provisioner runs here)",
					key, *c.Spec.StorageClassName))
			}
		}
		if len(unbound) == 0 {
			return standIns, nil
		}
		if time.Now().After(deadline) {
			return standIns, fmt.Errorf("claims not Bound within %s: %s", limit, strings.Join(unbound, ", "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
