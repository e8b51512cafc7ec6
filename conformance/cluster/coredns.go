package main

// CoreDNS in the box (issue 42): conformance/bin/coredns (conformance/coredns, github.com/coredns/coredns with only
// the plugins below linked) runs inside the box's network namespace, serves the cluster domain from the box's API
// server (its kubernetes plugin, the box's kubeconfig), and every real kubelet gets `clusterDNS` pointing at it, so
// a pod with dnsPolicy ClusterFirst (through kube-proxy and the kube-dns Service, proxycmd.go) resolves Services and the pods of headless Services by name.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// clusterDNSIP: CoreDNS's address, on the box's node bridge (boxnodes), reached by the pods through their node's
// bridge gateway (the namespace forwards between its interfaces). As upstream, the kubelets' clusterDNS is the
// kube-dns Service's ClusterIP (proxycmd.go kubeDNSIP), which kube-proxy carries to this address.
const clusterDNSIP = "10.2.0.254"

// ready/health listen on loopback ports of the box's namespace (upstream's :8181 and :8080 on every address).
const corednsReadyAddr, corednsHealthAddr = "127.0.0.1:18181", "127.0.0.1:18080"

var corednsBin string // --coredns

// corefile: upstream's Corefile for Kubernetes (coredns/deployment@000c366e kubernetes/coredns.yaml.sed, the
// ConfigMap `coredns`) with these differences, each for the box:
//   - kubernetes: `kubeconfig` names the box's kubeconfig (upstream runs in a pod and uses its service account);
//     the zones are cluster.local and the reverse zones of the box's Service and pod ranges (upstream's
//     REVERSE_CIDRS placeholder; in-addr.arpa, ip6.arpa as kubeadm writes them); `fallthrough` kept as upstream.
//   - no `forward . UPSTREAMNAMESERVER` and no `loop` (loop only detects forwarding loops): nothing may leave the
//     box's namespace, so a name outside cluster.local is not answered (REFUSED by CoreDNS), never forwarded.
//   - no `prometheus :9153` and no `reload` (no metrics scraped; the Corefile never changes during a run); not
//     linked in (conformance/coredns/main.go), to keep the build small.
//   - no `loadbalance` (the order of A records does not matter to the box's checks; not linked in).
//   - `health` and `ready` on loopback ports of the namespace (upstream: :8080 and :8181 of the pod); `lameduck`
//     dropped (no rolling restart).
//   - `cache 30` kept as upstream; the box waits for CoreDNS's `ready` before any kubelet starts.
func corefile(kubeconfig string) string {
	return fmt.Sprintf(`.:53 {
    errors
    log . "{remote} {type} {name} {rcode}"
    health %s
    ready %s
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
}
`, corednsHealthAddr, corednsReadyAddr, kubeconfig)
}

// StartCoreDNS starts CoreDNS on clusterDNSIP:53 (an address it adds to the node bridge) and waits for its
// ready endpoint (every plugin ready: the kubernetes plugin has synced its informers with the API server).
func StartCoreDNS(ctx context.Context, box *Box, bin, logDir string, logf func(string, ...any)) (*exec.Cmd, error) {
	if err := runCmd("ip", "addr", "add", clusterDNSIP+"/32", "dev", "boxnodes"); err != nil {
		return nil, err
	}
	conf := filepath.Join(box.Dir, "Corefile")
	if err := os.WriteFile(conf, []byte(corefile(box.Kubeconfig)), 0o644); err != nil {
		return nil, err
	}
	lf, err := os.Create(filepath.Join(logDir, "coredns.log"))
	if err != nil {
		return nil, err
	}
	c := exec.CommandContext(ctx, bin, "-conf", conf, "-dns.port", "53")
	c.Stdout, c.Stderr = lf, lf
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("coredns: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + corednsReadyAddr + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-done:
			return nil, fmt.Errorf("coredns exited: %s (log %s)", c.ProcessState, lf.Name())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = c.Process.Kill()
			return nil, fmt.Errorf("coredns not ready within 60s (log %s)", lf.Name())
		}
		time.Sleep(300 * time.Millisecond)
	}
	logf("CoreDNS ready on %s:53 (cluster.local from the box's API server)", clusterDNSIP)
	return c, nil
}

// CoreDNSVersion: `coredns -version`'s first line (CoreDNS-1.15.0 ...).
func CoreDNSVersion(bin string) string {
	out, err := exec.Command(bin, "-version").Output()
	if err != nil {
		return "unknown: " + err.Error()
	}
	return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
}
