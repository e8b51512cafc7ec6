package main

// Name checks on real nodes (issue 42): every host name a pod's objects put into an env var (LWS_LEADER_ADDRESS,
// MASTER_ADDR, any *_ADDR/*_ADDRESS/*_HOST), into its command line (torchrun's --rdzv_endpoint/--master_addr) and
// every Service of its namespace is resolved from inside the pod (`ctr tasks exec ... getent ahostsv4 NAME`: the
// container's own resolv.conf as the kubelet wrote it, ClusterFirst through CoreDNS) and compared with the
// addresses of the pod or Service the name stands for, as the API server holds them. realnode_check.py judges.

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NameCheck is one host name resolved from inside a pod on a real node.
type NameCheck struct {
	Name      string   `json:"name"`             // as the pod names it
	From      string   `json:"from"`             // where: "container trainer env MASTER_ADDR", "... --rdzv_endpoint", "Service ns/x"
	Container string   `json:"container"`        // the container the lookup ran in
	Resolved  []string `json:"resolved"`         // the IPv4 addresses getent printed
	Error     string   `json:"error,omitempty"`  // getent's exit status and output when it found nothing
	Target    string   `json:"target,omitempty"` // what the name stands for: "pod ns/p", "Service ns/s (ClusterIP)", "Service ns/s (headless)"
	Expect    []string `json:"expect"`           // that target's addresses
	Hint      string   `json:"hint,omitempty"`   // why it cannot resolve as it should (a Service taking a subdomain's name ...)
}

// flags whose value is host:port or host (torchrun: torch/distributed/run.py --rdzv-endpoint/--rdzv_endpoint,
// --master-addr/--master_addr)
var hostFlags = map[string]bool{"--rdzv_endpoint": true, "--rdzv-endpoint": true, "--master_addr": true, "--master-addr": true}

func hostEnv(name string) bool {
	return name == "LWS_LEADER_ADDRESS" || name == "MASTER_ADDR" || strings.HasSuffix(name, "_ADDR") ||
		strings.HasSuffix(name, "_ADDRESS") || strings.HasSuffix(name, "_HOST")
}

// hostOf: the host part of host[:port], "" when it is no name to resolve (an IP, empty, an unexpanded $(VAR), a URL)
func hostOf(v string) string {
	v = strings.TrimSpace(v)
	if h, _, err := net.SplitHostPort(v); err == nil {
		v = h
	}
	if v == "" || net.ParseIP(v) != nil || strings.ContainsAny(v, "$/ ()@") || v == "localhost" {
		return ""
	}
	return v
}

// namesOf: the names a pod's running containers carry, first container that carries a name runs its lookup.
func namesOf(p corev1.Pod, env map[string]map[string]string, cmdline map[string][]string, svcs []corev1.Service) []NameCheck {
	var out []NameCheck
	seen := map[string]bool{}
	add := func(name, from, container string) {
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		out = append(out, NameCheck{Name: name, From: from, Container: container})
	}
	var running []string
	for _, c := range p.Spec.Containers {
		if env[c.Name] != nil {
			running = append(running, c.Name)
		}
	}
	for _, c := range running {
		keys := make([]string, 0, len(env[c]))
		for k := range env[c] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, e := range spec(p, c).Env {
			if hostEnv(e.Name) {
				add(hostOf(env[c][e.Name]), fmt.Sprintf("container %s env %s", c, e.Name), c)
			}
		}
		var words []string
		for _, a := range cmdline[c] {
			words = append(words, strings.Fields(a)...)
		}
		for i, w := range words {
			k, v, eq := strings.Cut(w, "=")
			if !hostFlags[k] {
				continue
			}
			if !eq && i+1 < len(words) {
				v = words[i+1]
			}
			add(hostOf(v), fmt.Sprintf("container %s command line %s", c, k), c)
		}
	}
	if len(running) > 0 {
		for _, s := range svcs {
			if s.Namespace == p.Namespace && !(s.Namespace == "default" && s.Name == "kubernetes") {
				add(s.Name, "Service "+s.Namespace+"/"+s.Name, running[0])
			}
		}
	}
	return out
}

func spec(p corev1.Pod, name string) corev1.Container {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	return corev1.Container{}
}

// nameWorld: what the API server holds that a cluster-domain name can stand for.
type nameWorld struct {
	pods   []corev1.Pod
	svcs   []corev1.Service
	slices []discoveryv1.EndpointSlice
}

func readNameWorld(ctx context.Context, c kubernetes.Interface) (*nameWorld, error) {
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	svcs, err := c.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	sl, err := c.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return &nameWorld{pods.Items, svcs.Items, sl.Items}, nil
}

func (w *nameWorld) service(name, ns string) *corev1.Service {
	for i := range w.svcs {
		if w.svcs[i].Name == name && w.svcs[i].Namespace == ns {
			return &w.svcs[i]
		}
	}
	return nil
}

// expect fills Target, Expect and Hint of a name as a pod of namespace ns would have it resolved (its search
// path: <ns>.svc.cluster.local, svc.cluster.local, cluster.local).
func (w *nameWorld) expect(nc *NameCheck, ns string) {
	n := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(nc.Name, "."), ".cluster.local"), ".svc")
	parts := strings.Split(n, ".")
	podOf := func(host, sub, pns string) bool {
		for _, p := range w.pods {
			if p.Namespace == pns && p.Spec.Hostname == host && p.Spec.Subdomain == sub && p.DeletionTimestamp == nil {
				nc.Target = "pod " + p.Namespace + "/" + p.Name + " (hostname " + host + ", subdomain " + sub + ")"
				if p.Status.PodIP != "" {
					nc.Expect = []string{p.Status.PodIP}
				}
				s := w.service(sub, pns)
				if s == nil {
					nc.Hint = fmt.Sprintf("no Service %s/%s: the pods' subdomain has no Service, so no DNS record", pns, sub)
				} else if !w.hasEndpoint(s, host) {
					kind := "headless"
					if s.Spec.ClusterIP != corev1.ClusterIPNone {
						kind = "not headless, clusterIP " + s.Spec.ClusterIP
					}
					nc.Hint = fmt.Sprintf("Service %s/%s (%s, selector %v, owners %s) has the subdomain's name but no endpoint "+
						"with hostname %s (it does not select the pod, or the pod is not Ready and publishNotReadyAddresses "+
						"is false): CoreDNS has no record for %s.%s", pns, sub, kind, s.Spec.Selector, owners(s.OwnerReferences),
						host, host, sub)
				}
				return true
			}
		}
		return false
	}
	svcOf := func(name, sns string) bool {
		s := w.service(name, sns)
		if s == nil {
			return false
		}
		if s.Spec.ClusterIP != corev1.ClusterIPNone && s.Spec.ClusterIP != "" {
			nc.Target = "Service " + sns + "/" + name + " (ClusterIP)"
			nc.Expect = []string{s.Spec.ClusterIP}
			return true
		}
		nc.Target = "Service " + sns + "/" + name + " (headless: its endpoints)"
		nc.Expect = []string{}
		for _, sl := range w.slices {
			if sl.Namespace != sns || sl.Labels[discoveryv1.LabelServiceName] != name {
				continue
			}
			for _, e := range sl.Endpoints {
				if s.Spec.PublishNotReadyAddresses || e.Conditions.Ready == nil || *e.Conditions.Ready {
					nc.Expect = append(nc.Expect, e.Addresses...)
				}
			}
		}
		sort.Strings(nc.Expect)
		return true
	}
	switch len(parts) {
	case 1:
		svcOf(parts[0], ns)
	case 2:
		if !podOf(parts[0], parts[1], ns) {
			svcOf(parts[0], parts[1])
		}
	case 3:
		podOf(parts[0], parts[1], parts[2])
	}
}

// hasEndpoint: an EndpointSlice of the Service holds an endpoint with that hostname that CoreDNS serves (ready,
// or every endpoint with publishNotReadyAddresses: the EndpointSlice controller then marks them ready).
func (w *nameWorld) hasEndpoint(s *corev1.Service, host string) bool {
	for _, sl := range w.slices {
		if sl.Namespace != s.Namespace || sl.Labels[discoveryv1.LabelServiceName] != s.Name {
			continue
		}
		for _, e := range sl.Endpoints {
			if e.Hostname != nil && *e.Hostname == host && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				return true
			}
		}
	}
	return false
}

func owners(refs []metav1.OwnerReference) string {
	if len(refs) == 0 {
		return "none"
	}
	var s []string
	for _, r := range refs {
		s = append(s, r.Kind+"/"+r.Name)
	}
	return strings.Join(s, ",")
}

var execSeq atomic.Int64

// resolveIn runs `getent ahostsv4 NAME` in the pod's container through its node's containerd (a process of the
// container: its network namespace, its /etc/resolv.conf and nsswitch.conf).
func resolveIn(ctx context.Context, p corev1.Pod, container string, nc *NameCheck) {
	sock, id, fifo, ok := containerTask(p, container)
	if !ok {
		nc.Error = "container not found on its node"
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "ctr", "--address", sock, "-n", "k8s.io", "tasks", "exec", "--fifo-dir", fifo,
		"--exec-id", fmt.Sprintf("box-resolve-%d", execSeq.Add(1)), id, "getent", "ahostsv4", nc.Name).CombinedOutput()
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && net.ParseIP(f[0]) != nil && !seen[f[0]] {
			seen[f[0]] = true
			nc.Resolved = append(nc.Resolved, f[0])
		}
	}
	sort.Strings(nc.Resolved)
	if err != nil && len(nc.Resolved) == 0 {
		nc.Error = strings.TrimSpace(fmt.Sprintf("getent ahostsv4 %s: %v %s", nc.Name, err, strings.TrimSpace(string(out))))
	}
	if nc.Resolved == nil {
		nc.Resolved = []string{}
	}
}

// CheckNames resolves the names of one pod on a real node (nothing without CoreDNS or a running container).
func CheckNames(ctx context.Context, w *nameWorld, p corev1.Pod, env map[string]map[string]string, cmdline map[string][]string) []NameCheck {
	if corednsBin == "" || w == nil {
		return nil
	}
	checks := namesOf(p, env, cmdline, w.svcs)
	checks = append(checks, hostfileNames(ctx, p, env, checks)...) // the MPI hostfile's hosts (gangs.go)
	for i := range checks {
		if checks[i].Error != "" {
			continue // nothing to resolve (a hostfile that cannot be read: gangs.go)
		}
		w.expect(&checks[i], p.Namespace)
		if checks[i].Expect == nil {
			checks[i].Expect = []string{}
		}
		resolveIn(ctx, p, checks[i].Container, &checks[i])
	}
	return checks
}
