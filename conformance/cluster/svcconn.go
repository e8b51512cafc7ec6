package main

// Connections to Services' ports on real nodes (issue 42): for each Service with a ClusterIP that selects a pod of
// a real node, the box connects from inside a client pod of the Service's namespace to `<service>:<port>` (the
// name through CoreDNS, the ClusterIP through kube-proxy's rules to a pod's targetPort) with the stand-in's
// python3, and records whether something answered, with the TCP ports each selected pod listens on (realnode.go
// listeningPorts). realnode_check.py judges: a Service port whose pods do not listen on its targetPort, or that
// nothing answers, is a finding naming the Service, the port, the targetPort and the pods.
//
// A headless Service (clusterIP None) is not dialled: kube-proxy does not carry it, and its clients reach its
// pods by their own names (the names check, names.go). A Service that also selects pods of fake nodes is dialled
// at each real-node pod's IP and targetPort instead of its ClusterIP (kube-proxy could pick a fake pod's address,
// where nothing runs).

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ServiceConn is one TCP port of one Service, dialled from a client pod.
type ServiceConn struct {
	Service    string           `json:"service"` // namespace/name
	ClusterIP  string           `json:"clusterIP"`
	Port       int32            `json:"port"`
	PortName   string           `json:"portName,omitempty"`
	TargetPort string           `json:"targetPort"` // as the Service gives it (a number or a container port's name)
	Pods       []ServiceConnPod `json:"pods"`       // the pods of real nodes it selects
	FakePods   []string         `json:"fakeNodePods,omitempty"`
	Client     string           `json:"client"` // namespace/pod container the connections were made from
	Attempts   []ConnAttempt    `json:"attempts"`
}

// ServiceConnPod: a selected pod, the targetPort resolved on it and what listens in it.
type ServiceConnPod struct {
	Pod        string `json:"pod"`
	IP         string `json:"ip"`
	Ready      bool   `json:"ready"`
	TargetPort int    `json:"targetPort"` // 0: a named targetPort the pod's containers do not declare
	Listening  []int  `json:"listening"`  // nil: not read (no running container)
}

// ConnAttempt: one connection, `python3 -c ... HOST PORT` in the client's container.
type ConnAttempt struct {
	Dial      string `json:"dial"` // host:port
	Via       string `json:"via"`  // "clusterIP" (name -> ClusterIP -> kube-proxy) or "pod" (a real-node pod's IP)
	Connected bool   `json:"connected"`
	Error     string `json:"error,omitempty"`
}

// dialScript: connect with a 5 s timeout, print why not, exit 1 when nothing answered.
const dialScript = `import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
except OSError as e:
    print(type(e).__name__, e)
    sys.exit(1)
`

// CheckServiceConns dials every TCP port of every Service with a ClusterIP that selects a real-node pod, from a
// running real-node pod of its namespace (one that the Service does not select when there is one).
func CheckServiceConns(ctx context.Context, b *Box, views []PodView) ([]ServiceConn, error) {
	if corednsBin == "" || len(realNodeNames) == 0 {
		return nil, nil
	}
	waitReadyComing(ctx, b, readyComingWait)
	svcs, err := b.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := b.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	listening := map[string][]int{}
	running := map[string]string{} // ns/pod -> a running container
	for _, v := range views {
		if v.Env != nil && realNodeNames[v.Node] {
			listening[v.Namespace+"/"+v.Name] = v.Listening
			var p corev1.Pod
			for i := range pods.Items {
				if pods.Items[i].Namespace == v.Namespace && pods.Items[i].Name == v.Name {
					p = pods.Items[i]
				}
			}
			for _, c := range p.Spec.Containers {
				if v.Env[c.Name] != nil {
					running[v.Namespace+"/"+v.Name] = c.Name
					break
				}
			}
		}
	}
	var out []ServiceConn
	for _, s := range svcs.Items {
		if len(s.Spec.Selector) == 0 || s.Spec.ClusterIP == corev1.ClusterIPNone || s.Spec.ClusterIP == "" {
			continue
		}
		sel := labels.SelectorFromSet(s.Spec.Selector)
		var real, fake []corev1.Pod
		for _, p := range pods.Items {
			if p.Namespace != s.Namespace || p.Spec.NodeName == "" || p.DeletionTimestamp != nil || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if realNodeNames[p.Spec.NodeName] {
				real = append(real, p)
			} else {
				fake = append(fake, p)
			}
		}
		if len(real) == 0 {
			continue
		}
		client, container := pickClient(pods.Items, running, s.Namespace, sel)
		for _, sp := range s.Spec.Ports {
			if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
				continue
			}
			sc := ServiceConn{Service: s.Namespace + "/" + s.Name, ClusterIP: s.Spec.ClusterIP, Port: sp.Port,
				PortName: sp.Name, TargetPort: sp.TargetPort.String(), Pods: []ServiceConnPod{}, Attempts: []ConnAttempt{}}
			if sp.TargetPort.IntValue() == 0 && sp.TargetPort.StrVal == "" {
				sc.TargetPort = fmt.Sprint(sp.Port) // unset: the port itself (the API server defaults it so)
			}
			for _, p := range real {
				// ready as an endpoint: the pod Ready, or any pod with publishNotReadyAddresses (kube-proxy then
				// carries it: the EndpointSlice controller marks every endpoint ready)
				cp := ServiceConnPod{Pod: p.Namespace + "/" + p.Name, IP: p.Status.PodIP, Ready: podReady(p) || s.Spec.PublishNotReadyAddresses,
					TargetPort: resolveTargetPort(p, sp), Listening: listening[p.Namespace+"/"+p.Name]}
				sc.Pods = append(sc.Pods, cp)
			}
			for _, p := range fake {
				sc.FakePods = append(sc.FakePods, p.Namespace+"/"+p.Name)
			}
			if client == nil {
				sc.Attempts = append(sc.Attempts, ConnAttempt{Dial: fmt.Sprintf("%s:%d", s.Name, sp.Port), Via: "clusterIP",
					Error: "no running container of a real-node pod in namespace " + s.Namespace + " to connect from"})
				out = append(out, sc)
				continue
			}
			sc.Client = client.Namespace + "/" + client.Name + " " + container
			if len(fake) == 0 {
				sc.Attempts = append(sc.Attempts, dialFrom(ctx, *client, container, s.Name, int(sp.Port), "clusterIP"))
			} else {
				for _, cp := range sc.Pods {
					if cp.IP != "" && cp.TargetPort != 0 {
						sc.Attempts = append(sc.Attempts, dialFrom(ctx, *client, container, cp.IP, cp.TargetPort, "pod"))
					}
				}
			}
			out = append(out, sc)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Service < out[j].Service || out[i].Service == out[j].Service && out[i].Port < out[j].Port
	})
	return out, nil
}

// pickClient: a running real-node pod of the namespace, one the selector does not match first (a client of the
// Service, as its users would be), else one of its own pods.
func pickClient(pods []corev1.Pod, running map[string]string, ns string, sel labels.Selector) (*corev1.Pod, string) {
	var own *corev1.Pod
	names := make([]string, 0, len(pods))
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		k := pods[i].Namespace + "/" + pods[i].Name
		if pods[i].Namespace == ns && running[k] != "" {
			names = append(names, k)
			byName[k] = &pods[i]
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if !sel.Matches(labels.Set(byName[k].Labels)) {
			return byName[k], running[k]
		}
		if own == nil {
			own = byName[k]
		}
	}
	if own == nil {
		return nil, ""
	}
	return own, running[own.Namespace+"/"+own.Name]
}

// resolveTargetPort: the number a Service port's targetPort means on pod p (a name: the containerPort of that
// name in p's containers; unset: the port), 0 when p declares no port of that name.
func resolveTargetPort(p corev1.Pod, sp corev1.ServicePort) int {
	if sp.TargetPort.StrVal == "" {
		if n := sp.TargetPort.IntValue(); n != 0 {
			return n
		}
		return int(sp.Port)
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == sp.TargetPort.StrVal && (cp.Protocol == "" || cp.Protocol == corev1.ProtocolTCP) {
				return int(cp.ContainerPort)
			}
		}
	}
	return 0
}

// dialFrom runs dialScript in the client pod's container through its node's containerd (`ctr tasks exec`).
func dialFrom(ctx context.Context, p corev1.Pod, container, host string, port int, via string) ConnAttempt {
	a := ConnAttempt{Dial: fmt.Sprintf("%s:%d", host, port), Via: via}
	sock, id, fifo, ok := containerTask(p, container)
	if !ok {
		a.Error = "the client's container was not found on its node"
		return a
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "ctr", "--address", sock, "-n", "k8s.io", "tasks", "exec", "--fifo-dir", fifo,
		"--exec-id", fmt.Sprintf("box-dial-%d", execSeq.Add(1)), id, "python3", "-c", dialScript, host, fmt.Sprint(port)).CombinedOutput()
	if err != nil {
		a.Error = strings.TrimSpace(fmt.Sprintf("%s (%v)", strings.TrimSpace(string(out)), err))
		return a
	}
	a.Connected = true
	return a
}

// how long the Service check waits for pods whose readiness is on its way (waitReadyComing)
var readyComingWait = 90 * time.Second

// readyComing: the pod runs every container, is not Ready, and listens on the port of a container's readiness
// probe (startup probe where it has none): its server is up and the kubelet's next probes make it Ready. A client
// that dials its Service before that is refused by kube-proxy (no ready endpoint): aws-dev's client Service was
// dialled 26 s into the phase, while its vLLM leader served once its Ray group formed, at 57 s.
func readyComing(p corev1.Pod, listening []int) bool {
	if podReady(p) || p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	for _, c := range p.Spec.Containers {
		pr := c.ReadinessProbe
		if pr == nil {
			pr = c.StartupProbe
		}
		if port := probePort(c, pr); port != 0 {
			for _, l := range listening {
				if l == port {
					return true
				}
			}
		}
	}
	return false
}

// probePort: the TCP port an httpGet, tcpSocket or grpc probe asks (a named port resolved from the container's
// ports), 0 for none (an exec probe).
func probePort(c corev1.Container, pr *corev1.Probe) int {
	if pr == nil {
		return 0
	}
	var port intstr.IntOrString
	switch {
	case pr.HTTPGet != nil:
		port = pr.HTTPGet.Port
	case pr.TCPSocket != nil:
		port = pr.TCPSocket.Port
	case pr.GRPC != nil:
		return int(pr.GRPC.Port)
	default:
		return 0
	}
	if port.Type == intstr.Int {
		return port.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return int(cp.ContainerPort)
		}
	}
	return 0
}

// waitReadyComing waits, at most limit, while a real-node pod's readiness is coming (readyComing), reading the
// ports each listens on afresh (its server may have started after the phase's snapshot).
func waitReadyComing(ctx context.Context, b *Box, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		pods, err := b.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		coming := 0
		for _, p := range pods.Items {
			if !realNodeNames[p.Spec.NodeName] || p.DeletionTimestamp != nil || podReady(p) {
				continue
			}
			if _, _, listen := containerEnvs(ctx, p); readyComing(p, listen) {
				coming++
			}
		}
		if coming == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		time.Sleep(2 * time.Second)
	}
}
