package main

// The `kubernetes` Service for the pods of the real nodes. A pod reaches the API server at
// `https://kubernetes.default.svc` (the Service default/kubernetes, ClusterIP the range's first address, 10.96.0.1,
// port 443), carried by kube-proxy to the Service's endpoints. On a real cluster the API server's endpoint
// reconciler writes those endpoints: its --advertise-address and --secure-port (k8s.io/kubernetes@v1.33.13
// pkg/controlplane/reconcilers/lease.go; the Service itself by pkg/controlplane/controller/kubernetesservice). The
// box's API server listens on 127.0.0.1 of the box's namespace with `--endpoint-reconciler-type=none`
// (controlplane.go): the Service had no endpoint, kube-proxy rejected every connection to it and a pod's call to
// the API server failed "Network is unreachable" (existing-dev's NCCL check could not write its verdict
// ConfigMap). A pod cannot reach a loopback address of its host, so the box gives the API server an address on the
// node bridge (apiServiceIP), relays it there to its loopback port (a plain TCP relay: TLS passes through, the
// pod's client verifies the API server's own certificate, whose names include kubernetes.default.svc and
// 10.96.0.1: k8s.io/kubernetes@v1.33.13 cmd/kube-apiserver/app/options/completion.go:58), and writes an
// EndpointSlice of the `kubernetes` Service naming it, as it does for kube-dns (proxycmd.go). The address is in
// the box's namespace only: no route leaves it.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apiServiceIP: the API server's address on the node bridge (boxnodes), beside the registry (10.2.0.253) and
// CoreDNS (10.2.0.254).
const apiServiceIP = "10.2.0.252"

// apiServicePort: the port of the relay, the `kubernetes` Service's port (443, its name "https").
const apiServicePort = 443

var apiRelay net.Listener // closed by StopRealNodes

// startAPIService adds apiServiceIP to the node bridge, relays apiServiceIP:443 to the API server's loopback
// address and writes the EndpointSlice of default/kubernetes naming it (once the Service exists: the API server
// makes it at start).
func startAPIService(ctx context.Context, box *Box, logf func(string, ...any)) error {
	u, err := url.Parse(box.Config.Host)
	if err != nil {
		return fmt.Errorf("the API server's address %q: %w", box.Config.Host, err)
	}
	if err := runCmd("ip", "addr", "add", apiServiceIP+"/32", "dev", "boxnodes"); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(apiServiceIP, fmt.Sprint(apiServicePort)))
	if err != nil {
		return fmt.Errorf("the API server's relay: %w", err)
	}
	apiRelay = ln
	go relay(ln, u.Host)
	var svcPort int32
	deadline := time.Now().Add(30 * time.Second)
	for {
		svc, err := box.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err == nil && len(svc.Spec.Ports) > 0 {
			svcPort = svc.Spec.Ports[0].Port
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("Service default/kubernetes not made by the API server within 30s: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	tcp, name, port, ready := corev1.ProtocolTCP, "https", int32(apiServicePort), true
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes-box", Namespace: "default",
		Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "clusterbox"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{apiServiceIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &tcp, Port: &port}}}
	if _, err := box.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("EndpointSlice default/kubernetes-box: %w", err)
	}
	logf("Service default/kubernetes (port %d) carried to the API server %s through %s:%d", svcPort, u.Host,
		apiServiceIP, apiServicePort)
	return nil
}

// relay copies every connection accepted on ln to a new connection to target, both ways, until either side
// closes; it returns when ln is closed.
func relay(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			t, err := net.DialTimeout("tcp", target, 10*time.Second)
			if err != nil {
				return
			}
			defer t.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			half := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			go half(t, c)
			go half(c, t)
			wg.Wait()
		}()
	}
}

// workloadLabel: the label our rendering puts on each workload's objects (multinode/k8s labels)
const workloadLabel = "multinode.dev/workload"

// ConfigMapView: a ConfigMap of a workload (labelled workloadLabel) with its data as the box read it at the end of
// a phase: what the pods wrote into it through the API server (the NCCL check's verdict ConfigMap).
type ConfigMapView struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels"`
	Data      map[string]string `json:"data"`
}

func configMapViews(ctx context.Context, box *Box) ([]ConfigMapView, error) {
	cms, err := box.Client.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: workloadLabel})
	if err != nil {
		return nil, err
	}
	out := []ConfigMapView{} // [] when none: read, and none there
	for _, c := range cms.Items {
		out = append(out, ConfigMapView{Namespace: c.Namespace, Name: c.Name, Labels: c.Labels, Data: c.Data})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, nil
}
