package main

// Real nodes in the box (issue 42): a real kubelet of k8s.io/kubernetes (the control plane's version, run as
// `clusterbox kubelet`, kubeletcmd.go) with its own containerd (Debian's containerd and runc: containerd's
// --root, --state and socket per node, so no kubelet sees another's containers), a CNI bridge of its own with its
// own pod CIDR (Debian's containernetworking-plugins), our device plugin (deviceplugin.go) for the extended
// resources the catalog gives the node, and the stand-in images imported with `ctr images import`.
//
// Each real node lives in a mount namespace of its own (`clusterbox node-ns`, containerd started in it, the
// kubelet entering it with nsenter --mount): the kubelet's device manager listens on the fixed path
// /var/lib/kubelet/device-plugins/kubelet.sock (k8s.io/kubernetes@v1.33.13 pkg/kubelet/cm/devicemanager/
// manager.go:133, not under --root-dir), so each node gets that directory bind-mounted from its own folder; the
// kubelet's volume mounts and containerd's rootfs mounts stay in that namespace, where runc sees them.
// Everything runs in the box's network namespace (netns.go): node addresses sit on a dummy interface of the box,
// each node's pods on its bridge; the routes between bridges are the box's own.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RealNodeView is what the box records of one real node.
type RealNodeView struct {
	Name        string            `json:"name"`
	IP          string            `json:"ip"`
	PodCIDR     string            `json:"podCIDR"`
	Bridge      string            `json:"bridge"`
	Machine     map[string]string `json:"machine"`               // cpu and memory the kubelet reports (the catalog's)
	Devices     map[string]int    `json:"devices"`               // extended resources our device plugin registers
	Ready       bool              `json:"ready"`                 // NodeReady True seen from the API server
	Allocatable map[string]string `json:"allocatable,omitempty"` // as the kubelet reported it
	Images      []string          `json:"images,omitempty"`
	Error       string            `json:"error,omitempty"`
	Dir         string            `json:"dir"`
	HostPaths   []HostPathShadow  `json:"hostPaths,omitempty"` // the stack's hostPath volumes in the node's mount namespace
}

// RealNode is one running real node.
type RealNode struct {
	View       RealNodeView
	dir        string
	containerd *exec.Cmd
	kubelet    *exec.Cmd
	done       map[*exec.Cmd]chan struct{} // closed when the process has exited (its Wait returned)
	plugins    []*DevicePlugin
	socket     string
}

// Versions of what runs a real node (the Debian packages; printed by the tools themselves).
func realNodeVersions() map[string]string {
	v := map[string]string{}
	for _, c := range [][]string{{"containerd", "--version"}, {"runc", "--version"}} {
		out, err := exec.Command(c[0], c[1:]...).Output()
		if err != nil {
			v[c[0]] = "not found: " + err.Error()
			continue
		}
		v[c[0]] = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "containernetworking-plugins").Output(); err == nil {
		v["containernetworking-plugins"] = string(out)
	}
	return v
}

const cniBinDir = "/usr/lib/cni" // Debian's containernetworking-plugins

// StartRealNodes brings up the named nodes of nodes.yaml as real nodes. imageArchive is the stand-in image
// archive (image.go) imported into each node's containerd. The Node objects are created here first (labels,
// taints, as the fake kubelet would), the kubelet then takes over their status.
func StartRealNodes(ctx context.Context, box *Box, nodes []corev1.Node, imageArchive, logDir string, csiDrivers []string,
	logf func(string, ...any)) ([]*RealNode, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// the nodes' addresses: on a bridge with no port of the box's namespace (no packet leaves it; this kernel has no dummy)
	if err := runCmd("ip", "link", "add", "boxnodes", "type", "bridge"); err != nil {
		return nil, err
	}
	if err := runCmd("ip", "link", "set", "boxnodes", "up"); err != nil {
		return nil, err
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil {
		return nil, fmt.Errorf("ip_forward in the box's namespace: %w", err)
	}
	// the box's registry (registry.go): every pull of every real node goes there (hosts dir, containerd.toml)
	if standInContent != nil {
		if err := startBoxRegistry(box.Dir, logf); err != nil {
			return nil, err
		}
	}
	// CoreDNS first: every kubelet's clusterDNS points at it (coredns.go)
	if corednsBin != "" {
		c, err := StartCoreDNS(ctx, box, corednsBin, logDir, logf)
		if err != nil {
			return nil, err
		}
		corednsCmd = c
	}
	// The nodes' folders (containerd's content store and unpacked snapshots, ~0.5 GB a node with the stand-in) on
	// a tmpfs of the run: unmounted at the end instead of a minute of file deletion on disk.
	realNodesMount = filepath.Join(box.Dir, "nodes")
	if err := os.MkdirAll(realNodesMount, 0o755); err != nil {
		return nil, err
	}
	// its size from the number of nodes and this machine's free memory (nodestmpfs.go)
	avail := memAvailable()
	size, why := nodesTmpfsSize(len(nodes), avail, nodesTmpfsGiB)
	if err := syscall.Mount("box-nodes", realNodesMount, "tmpfs", 0, fmt.Sprintf("size=%dm,mode=0755", size>>20)); err != nil {
		return nil, fmt.Errorf("tmpfs for the real nodes: %w", err)
	}
	logf("real nodes' tmpfs: %.1f GiB (%s)", float64(size)/float64(gib), why)
	nodesTmpfs = watchTmpfs(NodesTmpfsView{Path: realNodesMount, SizeBytes: size, Why: why, MemAvailableBytes: avail})
	var out []*RealNode
	for i, n := range nodes {
		rn := &RealNode{dir: filepath.Join(box.Dir, "nodes", n.Name)}
		rn.View = RealNodeView{Name: n.Name, IP: fmt.Sprintf("10.2.0.%d", i+1), PodCIDR: fmt.Sprintf("10.245.%d.0/24", i+1),
			Bridge: fmt.Sprintf("boxbr%d", i+1), Dir: rn.dir, Devices: map[string]int{}, Machine: map[string]string{}}
		out = append(out, rn)
		if err := rn.start(ctx, box, self, n, imageArchive, logDir, csiDrivers, logf); err != nil {
			rn.View.Error = err.Error()
			return out, fmt.Errorf("real node %s: %w", n.Name, err)
		}
	}
	// kube-proxy once the Node objects exist (it reads its node's object at start, retrying for ~30 s otherwise),
	// before any pod: the kubelets' clusterDNS is the kube-dns ClusterIP it carries
	if corednsBin != "" && len(nodes) > 0 {
		if err := StartKubeProxy(ctx, box, self, nodes[0].Name, logDir, logf); err != nil {
			return out, err
		}
	}
	// wait until every real node is Ready with its devices registered
	deadline := time.Now().Add(120 * time.Second)
	for _, rn := range out {
		for {
			node, err := box.Client.CoreV1().Nodes().Get(ctx, rn.View.Name, metav1.GetOptions{})
			if err == nil && nodeReady(node) && devicesAdvertised(node, rn.View.Devices) {
				rn.View.Ready = true
				rn.View.Allocatable = map[string]string{}
				for k, q := range node.Status.Allocatable {
					rn.View.Allocatable[string(k)] = q.String()
				}
				break
			}
			if e := rn.exited(); e != "" {
				return out, fmt.Errorf("real node %s: %s", rn.View.Name, e)
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return out, fmt.Errorf("real node %s not Ready with its devices within 120s (kubelet log %s)", rn.View.Name,
					filepath.Join(logDir, "kubelet-"+rn.View.Name+".log"))
			}
			time.Sleep(time.Second)
		}
		logf("real node %s Ready (%s, pods on %s), devices %v", rn.View.Name, rn.View.IP, rn.View.PodCIDR, rn.View.Devices)
	}
	return out, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func devicesAdvertised(n *corev1.Node, want map[string]int) bool {
	for name, count := range want {
		q, ok := n.Status.Allocatable[corev1.ResourceName(name)]
		if !ok || q.Value() != int64(count) {
			return false
		}
	}
	return true
}

func runCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// extended resources of a node: every capacity entry with a domain (nvidia.com/gpu, vpc.amazonaws.com/efa, rdma/...)
// except kubernetes.io's own; hugepages are the kernel's, not a device plugin's (not registered: docs).
func extendedResources(n corev1.Node) map[string]int {
	out := map[string]int{}
	for name, q := range n.Status.Capacity {
		s := string(name)
		if !strings.Contains(s, "/") || strings.HasPrefix(s, "kubernetes.io/") || strings.HasPrefix(s, "requests.") ||
			strings.HasPrefix(s, "hugepages-") || strings.HasPrefix(s, "attachable-volumes-") {
			continue
		}
		if q.Value() > 0 {
			out[s] = int(q.Value())
		}
	}
	return out
}

func (rn *RealNode) start(ctx context.Context, box *Box, self string, n corev1.Node, imageArchive, logDir string,
	csiDrivers []string, logf func(string, ...any)) error {
	d := rn.dir
	d0 := d
	for _, sub := range []string{"containerd/root", "containerd/state", "containerd/opt", "cni/conf", "cni/data",
		"kubelet", "device-plugins", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return err
		}
	}
	if err := runCmd("ip", "addr", "add", rn.View.IP+"/32", "dev", "boxnodes"); err != nil {
		return err
	}
	rn.socket = filepath.Join(d, "containerd", "containerd.sock")
	realNodeSockets[n.Name] = rn.socket
	conf := containerdConfig(d, rn.socket, rn.View.IP)
	if registryHostsDir != "" {
		// every registry host to the box's registry (registry.go; containerd@v1.6.20 docs/hosts.md "CRI")
		conf += fmt.Sprintf("  [plugins.\"io.containerd.grpc.v1.cri\".registry]\n    config_path = %q\n", registryHostsDir)
	}
	if err := os.WriteFile(filepath.Join(d, "containerd.toml"), []byte(conf), 0o644); err != nil {
		return err
	}
	// CNI: the bridge plugin (gateway on the bridge, hairpin so a pod reaches itself through a Service) with
	// host-local addresses from this node's pod CIDR, state in this node's folder; portmap for hostPort.
	// Keys: containernetworking/plugins@v1.1.1 plugins/main/bridge/bridge.go NetConf, plugins/ipam/host-local.
	gw := strings.TrimSuffix(rn.View.PodCIDR, "0/24") + "1"
	cni := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "box-%s", "plugins": [
 {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
  "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]],
           "routes": [{"dst": "0.0.0.0/0"}]}},
 {"type": "portmap", "capabilities": {"portMappings": true}}
]}
`, n.Name, rn.View.Bridge, filepath.Join(d, "cni/data"), rn.View.PodCIDR, gw)
	if err := os.WriteFile(filepath.Join(d, "cni/conf", "10-box.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	clog, err := os.Create(filepath.Join(logDir, "containerd-"+n.Name+".log"))
	if err != nil {
		return err
	}
	if len(nodeHostPaths) > 0 {
		hp, err := json.Marshal(nodeHostPaths)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "hostpaths.json"), hp, 0o644); err != nil {
			return err
		}
	}
	rn.containerd = exec.CommandContext(ctx, self, "node-ns", d, "--", "containerd", "--config", filepath.Join(d, "containerd.toml"))
	rn.containerd.Stdout, rn.containerd.Stderr = clog, clog
	rn.containerd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := rn.containerd.Start(); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	rn.watch(rn.containerd)
	if err := waitSocket(rn.socket, 30*time.Second); err != nil {
		return fmt.Errorf("containerd: %w (log %s)", err, clog.Name())
	}
	if data, err := os.ReadFile(filepath.Join(d, "hostpaths-done.json")); err == nil {
		if err := json.Unmarshal(data, &rn.View.HostPaths); err != nil {
			return fmt.Errorf("hostpaths-done.json: %w", err)
		}
		for _, h := range rn.View.HostPaths {
			if h.Failed != "" {
				return fmt.Errorf("hostPath %s: tmpfs at %s failed: %s", h.Path, h.Tmpfs, h.Failed)
			}
		}
	}
	// the stand-in images, into the CRI's namespace (k8s.io)
	if imageArchive != "" {
		t0 := time.Now()
		// the blobs an earlier node imported, hard-linked into this node's content store (the nodes' folders share
		// one tmpfs): the import then finds each blob present and writes none (containerd's default content sharing
		// policy "shared": containerd/containerd@v1.6.20 metadata/content.go:401-410), instead of hashing and
		// writing the archive again per node (28-185 s a node here under load; gcp-dev's 6 nodes ran past the box's
		// timeout importing); blobs are immutable, and a node that deletes one only drops its own link
		blobs := filepath.Join(d, "containerd", "root", "io.containerd.content.v1.content", "blobs", "sha256")
		if firstBlobs != "" {
			if k, err := linkBlobs(firstBlobs, blobs); err != nil {
				logf("real node %s: %d blobs linked from the first node, then: %v (the import writes the rest)", n.Name, k, err)
			}
		}
		out, err := exec.CommandContext(ctx, "ctr", "--address", rn.socket, "-n", "k8s.io", "images", "import",
			"--no-unpack", imageArchive).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr images import: %v: %s", err, out)
		}
		for _, tag := range sortedKeys(digestAliases) {
			if out, err := exec.CommandContext(ctx, "ctr", "--address", rn.socket, "-n", "k8s.io", "images", "tag", "--force",
				tag, digestAliases[tag]).CombinedOutput(); err != nil {
				return fmt.Errorf("ctr images tag %s %s: %v: %s", tag, digestAliases[tag], err, out)
			}
		}
		ls, _ := exec.CommandContext(ctx, "ctr", "--address", rn.socket, "-n", "k8s.io", "images", "ls", "-q").Output()
		rn.View.Images = strings.Fields(string(ls))
		if firstBlobs == "" {
			firstBlobs = blobs
		}
		logf("real node %s: %d stand-in images imported in %.1fs", n.Name, len(rn.View.Images), time.Since(t0).Seconds())
	}
	// the Node object first: labels and taints as plan gives them (the kubelet keeps them on an existing node)
	node := n.DeepCopy()
	node.Status = corev1.NodeStatus{}
	if _, err := box.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("node object: %w", err)
	}
	// The machine as the catalog gives it: the kubelet reports the node's allocatable of nodes.yaml as its
	// capacity (kubeletcmd.go wraps cadvisor's MachineInfo); nothing is reserved on top of it.
	cpu := n.Status.Allocatable[corev1.ResourceCPU]
	mem := n.Status.Allocatable[corev1.ResourceMemory]
	pods := n.Status.Allocatable[corev1.ResourcePods]
	rn.View.Machine["cpu"], rn.View.Machine["memory"], rn.View.Machine["pods"] = cpu.String(), mem.String(), pods.String()
	rn.View.Devices = extendedResources(n)
	kc := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzPort: 0
podLogsDir: %s
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
maxPods: %d
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
clusterDomain: cluster.local
resolvConf: ""
serializeImagePulls: false
registerNode: true
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
makeIPTablesUtilChains: false
%s`, rn.socket, rn.View.IP, filepath.Join(d, "pod-logs"), pods.Value(), clusterDNSConfig())
	// the kubelet reports whole cores; the fraction plan's allocatable lacks is reserved, so allocatable is plan's
	if r := (cpu.MilliValue()+999)/1000*1000 - cpu.MilliValue(); r > 0 {
		kc += fmt.Sprintf("kubeReserved: {cpu: \"%dm\"}\n", r)
	}
	if err := os.WriteFile(filepath.Join(d, "kubelet.yaml"), []byte(kc), 0o644); err != nil {
		return err
	}
	klog, err := os.Create(filepath.Join(logDir, "kubelet-"+n.Name+".log"))
	if err != nil {
		return err
	}
	rn.kubelet = exec.CommandContext(ctx, "nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", rn.containerd.Process.Pid), "--",
		self, "kubelet", "--config="+filepath.Join(d, "kubelet.yaml"), "--kubeconfig="+box.Kubeconfig,
		"--hostname-override="+n.Name, "--node-ip="+rn.View.IP, "--root-dir="+filepath.Join(d, "kubelet"),
		"--cert-dir="+filepath.Join(d, "kubelet", "pki"), "--machine-cpu="+cpu.String(),
		fmt.Sprintf("--machine-memory=%d", mem.Value()))
	rn.kubelet.Stdout, rn.kubelet.Stderr = klog, klog
	rn.kubelet.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := rn.kubelet.Start(); err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	rn.watch(rn.kubelet)
	// the stand-in CSI node plugins (csiplugin.go), registered through the kubelet's plugin registry
	for _, d := range csiDrivers {
		p := &CSIPlugin{driver: d, node: n.Name, volumes: filepath.Join(box.Dir, "volumes"), logf: logf,
			mountNSPid: func() int { return rn.containerd.Process.Pid }}
		if err := p.Serve(ctx, filepath.Join(d0, "kubelet")); err != nil {
			return fmt.Errorf("CSI stand-in %s: %w", d, err)
		}
	}
	// our device plugin, one per extended resource, registering with this kubelet's device manager
	names := make([]string, 0, len(rn.View.Devices))
	for name := range rn.View.Devices {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := NewDevicePlugin(n.Name, name, rn.View.Devices[name], filepath.Join(d, "device-plugins"))
		rn.plugins = append(rn.plugins, p)
		go p.Run(ctx, logf)
	}
	return nil
}

// containerdConfig is a real node's containerd 1.6 config (version 2): own root/state/socket; CRI with the
// stand-in pause image, cgroupfs, restrict_oom_score_adj (these machines deny lowering oom_score_adj: runc failed
// the sandbox with "can't get final child's PID from pipe: EOF" without it), CNI from this node's conf dir; a
// pulled image's layer blobs dropped once unpacked (discard_unpacked_layers: the PyTorch layer, pulled from the
// box's registry, is then kept once per node, in its snapshot, not twice). Each pod sandbox's network namespace
// is pinned under the node's CRI state dir (netns_mounts_under_state_dir), not in the machine's /var/run/netns:
// the box stops containerd without the CNI teardown that removes the pin, and the state dir lies on the nodes'
// tmpfs, which goes with the box (containerd/containerd@v1.6.20 pkg/cri/server/sandbox_run.go:270-273, the
// directory /var/run/netns unless the option names <state>/io.containerd.grpc.v1.cri/netns).
// Keys: containerd/containerd@v1.6.20 docs/cri/config.md, pkg/cri/config/config.go.
func containerdConfig(d, socket, ip string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = %q
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    discard_unpacked_layers = true
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, filepath.Join(d, "containerd/root"), filepath.Join(d, "containerd/state"), socket, socket+".ttrpc",
		filepath.Join(d, "containerd/opt"), pauseImage, ip, cniBinDir, filepath.Join(d, "cni/conf"))
}

// the containerd socket of each real node (containerEnvs reads its tasks)
var realNodeSockets = map[string]string{}

// containerEnvs reads the environment of each running container of a pod on a real node from its process:
// containerd's task list gives the container's PID (`ctr task ls`), /proc/<pid>/environ the variables as the
// kubelet expanded them (what "$(VAR)" became, what the downward API filled in), /proc/<pid>/cmdline the
// command line (command and args after the kubelet's $(VAR) expansion).
func containerEnvs(ctx context.Context, p corev1.Pod) (map[string]map[string]string, map[string][]string, []int) {
	sock := realNodeSockets[p.Spec.NodeName]
	if sock == "" {
		return nil, nil, nil
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", sock, "-n", "k8s.io", "tasks", "ls").Output()
	if err != nil {
		return nil, nil, nil
	}
	pids := map[string]string{}
	for _, line := range strings.Split(string(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 3 && f[2] == "RUNNING" {
			pids[f[0]] = f[1]
		}
	}
	envs, cmdlines := map[string]map[string]string{}, map[string][]string{}
	var listen []int
	for _, c := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		id := strings.TrimPrefix(c.ContainerID, "containerd://")
		pid, ok := pids[id]
		if !ok || c.State.Running == nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + pid + "/environ")
		if err != nil {
			continue
		}
		env := map[string]string{}
		for _, kv := range strings.Split(string(data), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		if _, ok := env["PATH"]; !ok {
			// a process that rewrote its environ area for its title (OpenSSH's sshd does: setproctitle): the
			// environment the runtime gives the container's processes, read by a process exec'd in it (gangs.go)
			if out, err := execIn(ctx, p, c.Name, "env", "-0"); err == nil {
				for _, kv := range strings.Split(out, "\x00") {
					if k, v, ok := strings.Cut(kv, "="); ok {
						env[k] = v
					}
				}
			}
		}
		envs[c.Name] = env
		if listen == nil {
			listen = listeningPorts(pid)
		}
		if data, err := os.ReadFile("/proc/" + pid + "/cmdline"); err == nil {
			cmdlines[c.Name] = strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
		}
	}
	return envs, cmdlines, listen
}

// listeningPorts: the TCP ports something listens on in the network namespace of process pid (the pod's: its
// containers share it), from /proc/<pid>/net/tcp and tcp6 (state 0A = LISTEN; the local port is the hex after ':').
func listeningPorts(pid string) []int {
	seen := map[int]bool{}
	out := []int{}
	for _, f := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile("/proc/" + pid + "/net/" + f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || fs[3] != "0A" {
				continue
			}
			var port int
			if i := strings.LastIndex(fs[1], ":"); i >= 0 {
				if _, err := fmt.Sscanf(fs[1][i+1:], "%X", &port); err == nil && !seen[port] {
					seen[port] = true
					out = append(out, port)
				}
			}
		}
	}
	sort.Ints(out)
	return out
}

func (rn *RealNode) watch(c *exec.Cmd) {
	if rn.done == nil {
		rn.done = map[*exec.Cmd]chan struct{}{}
	}
	ch := make(chan struct{})
	rn.done[c] = ch
	go func() { _ = c.Wait(); close(ch) }()
}

func (rn *RealNode) hasExited(c *exec.Cmd) bool {
	select {
	case <-rn.done[c]:
		return true
	default:
		return false
	}
}

// exited says why a node's process has stopped, "" while both run.
func (rn *RealNode) exited() string {
	for name, c := range map[string]*exec.Cmd{"containerd": rn.containerd, "kubelet": rn.kubelet} {
		if c != nil && rn.done[c] != nil && rn.hasExited(c) {
			return fmt.Sprintf("%s exited: %s", name, c.ProcessState)
		}
	}
	return ""
}

// StopRealNodes stops every node, all nodes at once: the kubelets first (SIGTERM, at most 5 s, then SIGKILL; no
// kubelet restarts a container after that), then every process of every container: each task killed through its
// node's containerd (`ctr tasks kill --all -s SIGKILL`), then SIGKILL to any process below the node's shims that
// still runs; then containerd, CoreDNS, kube-proxy and the shims. It returns how many processes of pods it saw
// below the shims, and those of them still running at the end with any process in the cgroup of one of the nodes'
// containers: none may outlive the box.
func StopRealNodes(rns []*RealNode) (int, []string) {
	type proc struct {
		c    *exec.Cmd
		done chan struct{}
	}
	stop := func(cmds func(rn *RealNode) []*exec.Cmd) {
		var procs []proc
		for _, rn := range rns {
			for _, c := range cmds(rn) {
				if c != nil && rn.done[c] != nil {
					procs = append(procs, proc{c, rn.done[c]})
					_ = c.Process.Signal(syscall.SIGTERM)
				}
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for _, p := range procs {
			select {
			case <-p.done:
			case <-time.After(time.Until(deadline)):
				_ = p.c.Process.Kill()
				<-p.done
			}
		}
	}
	stop(func(rn *RealNode) []*exec.Cmd { return []*exec.Cmd{rn.kubelet} })
	// every process of every pod, as the shims hold them now
	var seen []procID
	for _, rn := range rns {
		seen = append(seen, containerProcs(rn.dir)...)
	}
	ids := map[string]bool{} // every container of every node, by id (the name of its cgroup)
	for _, rn := range rns {
		if rn.containerd == nil || rn.done[rn.containerd] == nil || rn.hasExited(rn.containerd) {
			continue
		}
		if out, err := exec.Command("ctr", "--address", rn.socket, "-n", "k8s.io", "containers", "ls", "-q").Output(); err == nil {
			for _, id := range strings.Fields(string(out)) {
				ids[id] = true
			}
		}
		out, err := exec.Command("ctr", "--address", rn.socket, "-n", "k8s.io", "tasks", "ls", "-q").Output()
		if err != nil {
			continue
		}
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("ctr", "--address", rn.socket, "-n", "k8s.io", "tasks", "kill", "--all", "-s", "SIGKILL", id).Run()
		}
	}
	if left := waitGone(seen, 5*time.Second); len(left) > 0 {
		killProcs(left) // what containerd did not end (a task it no longer listed, a process outside the task's cgroup)
		waitGone(left, 3*time.Second)
	}
	stop(func(rn *RealNode) []*exec.Cmd { return []*exec.Cmd{rn.containerd} })
	boxRegistry.Stop()
	if apiRelay != nil {
		_ = apiRelay.Close()
		apiRelay = nil
	}
	for _, c := range []**exec.Cmd{&corednsCmd, &proxyCmd} {
		if *c != nil {
			_ = (*c).Process.Kill()
			*c = nil
		}
	}
	// the shims outlive containerd, and one may still be starting a container the kubelet asked for before it
	// stopped (its `runc create` and `runc init`: no task containerd listed, not below the shims at the first
	// look; one outlived a box): every process below them now, until none is left (sweepShims), then the shims
	// (their cgroups and mounts go with them)
	dirs := make([]string, 0, len(rns))
	for _, rn := range rns {
		dirs = append(dirs, rn.dir)
	}
	for _, p := range sweepShims(dirs, 5*time.Second) {
		if !containsProc(seen, p) {
			seen = append(seen, p)
		}
	}
	for _, rn := range rns {
		killShims(rn.dir)
	}
	// the end-of-box check: no process of a pod is left
	left := waitGone(seen, 2*time.Second)
	for _, p := range inContainers(ids) {
		if !containsProc(left, p) {
			left = append(left, p)
		}
	}
	leftovers := describeProcs(left)
	if nodesTmpfs != nil {
		v := nodesTmpfs.stop()
		nodesTmpfsView, nodesTmpfs = &v, nil
	}
	if realNodesMount != "" {
		_ = syscall.Unmount(realNodesMount, syscall.MNT_DETACH)
		realNodesMount = ""
	}
	return len(seen), leftovers
}

func containsProc(ps []procID, p procID) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// clusterDNSConfig: the kubelet's clusterDNS, the kube-dns Service's ClusterIP when the box runs CoreDNS (and
// with it kube-proxy, which carries that address to CoreDNS; else none: the kubelet
// then gives ClusterFirst pods the node's resolv.conf, here empty, and records MissingClusterDNS).
func clusterDNSConfig() string {
	if corednsBin == "" {
		return ""
	}
	return fmt.Sprintf("clusterDNS: [%s]\n", kubeDNSIP)
}

var corednsCmd *exec.Cmd // CoreDNS, stopped by StopRealNodes

var realNodesMount string // the tmpfs of the nodes' folders, unmounted by StopRealNodes

// killShims ends the containerd-shim processes started for this node (their command line names its state dir).
func killShims(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(data), "\x00", " ")
		if strings.Contains(cmd, "containerd-shim") && strings.Contains(cmd, dir) {
			var pid int
			if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func waitSocket(path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s after %s", path, limit)
}

// nodeNS is `clusterbox node-ns DIR -- CMD ARGS...`: run in a new mount namespace (the parent cloned it),
// bind DIR/device-plugins over /var/lib/kubelet/device-plugins, then exec CMD.
func nodeNS(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "usage: clusterbox node-ns DIR -- CMD ARGS...")
		return 2
	}
	dir, cmd := args[0], args[2:]
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		fmt.Fprintln(os.Stderr, "node-ns: make / private:", err)
		return 2
	}
	// the stack's hostPath directories: an empty tmpfs of this node over each (hostpaths.go)
	if err := shadowHostPaths(dir); err != nil {
		fmt.Fprintln(os.Stderr, "node-ns: hostPath volumes:", err)
		return 2
	}
	const dp = "/var/lib/kubelet/device-plugins"
	if err := os.MkdirAll(dp, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "node-ns:", err)
		return 2
	}
	if err := syscall.Mount(filepath.Join(dir, "device-plugins"), dp, "", syscall.MS_BIND, ""); err != nil {
		fmt.Fprintln(os.Stderr, "node-ns: bind device-plugins:", err)
		return 2
	}
	path, err := exec.LookPath(cmd[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "node-ns:", err)
		return 2
	}
	if err := syscall.Exec(path, cmd, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "node-ns: exec:", err)
	}
	return 2
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// firstBlobs: the content store's blob folder of the first real node that imported the stand-in archive
var firstBlobs string

// linkBlobs hard-links every blob of src that dst lacks into dst (made if missing); returns how many it linked.
func linkBlobs(src, dst string) (int, error) {
	entries, err := os.ReadDir(src)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		to := filepath.Join(dst, e.Name())
		if _, err := os.Lstat(to); err == nil {
			continue
		}
		if err := os.Link(filepath.Join(src, e.Name()), to); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
