package main

// `clusterbox kube-proxy`: the real kube-proxy of k8s.io/kubernetes (the box's version), its own cobra command
// (k8s.io/kubernetes@v1.33.13 cmd/kube-proxy/app/server.go NewProxyCommand) run in a process of its own (the
// command installs a signal handler, once per process). The box runs one for all its real nodes: they share the
// box's network namespace, where the Service rules are written (iptables mode, Debian's iptables).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func proxyMain(args []string) int {
	cmd := app.NewProxyCommand()
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		return 1
	}
	return 0
}

// kubeDNSIP: the kube-dns Service's ClusterIP (in the box's --service-cluster-ip-range 10.96.0.0/16; kubeadm's
// choice of the range's tenth address). With kube-proxy running, every kubelet's clusterDNS is this address, as
// upstream (coredns/deployment kubernetes/coredns.yaml.sed: Service kube-dns, `clusterIP: CLUSTER_DNS_IP`), so
// every name a pod resolves also proves that kube-proxy's rules carry a ClusterIP to its endpoint.
const kubeDNSIP = "10.96.0.10"

var proxyCmd *exec.Cmd // kube-proxy, stopped by StopRealNodes

// StartKubeProxy creates the kube-dns Service (no selector: CoreDNS is a process of the box, not a pod) with an
// EndpointSlice naming CoreDNS's address, starts kube-proxy (iptables mode) in the box's namespace and waits until
// its rules carry kube-dns's ClusterIP.
func StartKubeProxy(ctx context.Context, box *Box, self, node, logDir string, logf func(string, ...any)) error {
	ports := []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system",
		Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{ClusterIP: kubeDNSIP, Ports: ports}}
	if _, err := box.Client.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("Service kube-system/kube-dns: %w", err)
	}
	udp, tcp, p53 := corev1.ProtocolUDP, corev1.ProtocolTCP, int32(53)
	dns, dnsTCP, ready := "dns", "dns-tcp", true
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-box", Namespace: "kube-system",
		Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns", discoveryv1.LabelManagedBy: "clusterbox"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{clusterDNSIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &dns, Protocol: &udp, Port: &p53}, {Name: &dnsTCP, Protocol: &tcp, Port: &p53}}}
	if _, err := box.Client.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("EndpointSlice kube-system/kube-dns-box: %w", err)
	}
	// the `kubernetes` Service's endpoint, the API server reached from the pods (apiservice.go)
	if err := startAPIService(ctx, box, logf); err != nil {
		return err
	}
	lf, err := os.Create(filepath.Join(logDir, "kube-proxy.log"))
	if err != nil {
		return err
	}
	// --hostname-override: the first real node (the real nodes share the namespace, one kube-proxy serves them
	// all); --bind-address: CoreDNS's address on the node bridge as its node IP (used for NodePorts only); --masquerade-all: a pod reaching a Service backed by a pod of the
	// same bridge gets the reply through the namespace's conntrack (no br_netfilter here); conntrack sizes and
	// timeouts left as the kernel has them (0), health and metrics on loopback.
	proxyCmd = exec.CommandContext(ctx, self, "kube-proxy", "--kubeconfig="+box.Kubeconfig, "--proxy-mode=iptables",
		"--hostname-override="+node, "--bind-address="+clusterDNSIP, "--cluster-cidr=10.245.0.0/16",
		"--masquerade-all", "--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0", "--healthz-bind-address=127.0.0.1:10256",
		"--metrics-bind-address=127.0.0.1:10249")
	proxyCmd.Stdout, proxyCmd.Stderr = lf, lf
	proxyCmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := proxyCmd.Start(); err != nil {
		return fmt.Errorf("kube-proxy: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = proxyCmd.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _ := exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES").CombinedOutput()
		if strings.Contains(string(out), kubeDNSIP+"/32") {
			break
		}
		select {
		case <-done:
			return fmt.Errorf("kube-proxy exited: %s (log %s)", proxyCmd.ProcessState, lf.Name())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kube-proxy wrote no rule for kube-dns's %s within 60s (log %s)", kubeDNSIP, lf.Name())
		}
		time.Sleep(500 * time.Millisecond)
	}
	logf("kube-proxy (iptables) carries Service kube-system/kube-dns %s to CoreDNS %s", kubeDNSIP, clusterDNSIP)
	return nil
}
