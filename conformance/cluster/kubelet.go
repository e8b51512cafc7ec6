package main

// The fake kubelet: the only part of the box that is not the real thing. It registers the stack's Node
// objects (capacity, allocatable, labels, taints as plan computes them), keeps each node's Lease and Ready
// condition fresh (so the node lifecycle controller does not taint them unreachable), marks every pod bound
// to one of its nodes Running and Ready (containers "running", no process behind them), and finishes the
// deletion of pods on its nodes (grace period 0), as a kubelet does once containers stop.
// Not KWOK (sigs.k8s.io/kwok v0.8.0 as a library): it requires k8s.io/* v0.36 and so a second module and a
// second large binary (facts sheet "One module or several?"); what is needed here is this small loop.

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

const kubeletVersion = "v1.33.13"

// heartbeatEvery: how often the fake kubelet renews each Lease and NodeStatus. The real kubelet renews its Lease
// every 10 s (a quarter of the 40 s lease) and posts NodeStatus on change or every 5 min; here a quarter of the box's
// node-monitor grace period (controlplane.go), so a busy machine does not make a healthy node look dead.
const heartbeatEvery = 5 * time.Second

type FakeKubelet struct {
	client kubernetes.Interface
	nodes  map[string]bool
	// nodes whose kubelet is stopped (daytwo.go node failure): no Lease or NodeStatus heartbeat, no pod touched
	stopped map[string]bool
	mu      sync.Mutex
	nextIP  int
	logf    func(string, ...any)
}

func nodeConditions(now metav1.Time) []corev1.NodeCondition {
	c := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now,
			Message: "fake kubelet of the multinode cluster box"}
	}
	return []corev1.NodeCondition{
		c(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
		c(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
		c(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
		c(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
	}
}

// RegisterNodes creates the nodes with their status, then their leases.
func (k *FakeKubelet) RegisterNodes(ctx context.Context, nodes []corev1.Node) error {
	k.mu.Lock()
	k.nodes, k.stopped = map[string]bool{}, map[string]bool{}
	k.mu.Unlock()
	return k.AddNodes(ctx, nodes, 0)
}

// AddNodes registers more nodes (a pool's surge nodes, a repaired node: daytwo.go); first numbers their addresses.
func (k *FakeKubelet) AddNodes(ctx context.Context, nodes []corev1.Node, first int) error {
	for j := range nodes {
		i := first + j
		n := nodes[j].DeepCopy()
		status := n.Status
		now := metav1.Now()
		status.Conditions = nodeConditions(now)
		status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)},
			{Type: corev1.NodeHostName, Address: n.Name}}
		status.NodeInfo.KubeletVersion = kubeletVersion
		status.NodeInfo.OperatingSystem, status.NodeInfo.Architecture = "linux", "amd64"
		status.Phase = corev1.NodeRunning
		n.Status = status
		created, err := k.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if created, err = k.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err != nil {
				return err
			}
			created.Status = status
			_, err := k.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("node %s status: %w", n.Name, err)
		}
		k.mu.Lock()
		k.nodes[n.Name], k.stopped[n.Name] = true, false
		k.mu.Unlock()
	}
	return k.renew(ctx)
}

// Stop stops a node's kubelet: its Lease and NodeStatus are no longer renewed and its pods no longer touched.
func (k *FakeKubelet) Stop(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped[name] = true
}

// Forget drops a node whose Node object is deleted (the cloud replaced it).
func (k *FakeKubelet) Forget(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.nodes, name)
	delete(k.stopped, name)
}

// live: the nodes whose kubelet runs
func (k *FakeKubelet) live() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for n := range k.nodes {
		if !k.stopped[n] {
			out = append(out, n)
		}
	}
	return out
}

func (k *FakeKubelet) runs(node string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.nodes[node] && !k.stopped[node]
}

func (k *FakeKubelet) renew(ctx context.Context) error {
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	for _, name := range k.live() {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime: &now}}, metav1.CreateOptions{})
		} else if err == nil {
			l.Spec.RenewTime = &now
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("lease %s: %w", name, err)
		}
		n, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // deleted meanwhile (daytwo.go)
		}
		if err != nil {
			return err
		}
		t := metav1.Now()
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].LastHeartbeatTime = t
		}
		if _, err := k.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("node %s heartbeat: %w", name, err)
		}
	}
	return nil
}

// Run keeps leases fresh and acts on the pods bound to the nodes until ctx ends.
func (k *FakeKubelet) Run(ctx context.Context) {
	go func() {
		// every heartbeatEvery, well inside the controller-manager's --node-monitor-grace-period (controlplane.go)
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := k.renew(ctx); err != nil && ctx.Err() == nil {
					k.logf("fake kubelet: %v", err)
				}
			}
		}
	}()
	f := informers.NewSharedInformerFactory(k.client, 0)
	inf := f.Core().V1().Pods().Informer()
	handle := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			k.sync(ctx, p)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: handle, UpdateFunc: func(_, o any) { handle(o) }})
	f.Start(ctx.Done())
}

func (k *FakeKubelet) sync(ctx context.Context, p *corev1.Pod) {
	if p.Spec.NodeName == "" || !k.runs(p.Spec.NodeName) {
		return
	}
	if p.DeletionTimestamp != nil {
		err := k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
			Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			k.logf("fake kubelet: delete %s/%s: %v", p.Namespace, p.Name, err)
		}
		return
	}
	if p.Status.Phase == corev1.PodRunning {
		return
	}
	k.mu.Lock()
	k.nextIP++
	ip := fmt.Sprintf("10.244.%d.%d", k.nextIP/250, k.nextIP%250+1)
	k.mu.Unlock()
	now := metav1.Now()
	q := p.DeepCopy()
	q.Status.Phase = corev1.PodRunning
	q.Status.HostIP = "" // set below from the node's address
	for _, n := range []string{p.Spec.NodeName} {
		if node, err := k.client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); err == nil && len(node.Status.Addresses) > 0 {
			q.Status.HostIP = node.Status.Addresses[0].Address
			q.Status.HostIPs = []corev1.HostIP{{IP: q.Status.HostIP}}
		}
	}
	q.Status.PodIP, q.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	q.Status.StartTime = &now
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now}
	}
	keep := []corev1.PodCondition{}
	for _, c := range q.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			keep = append(keep, c)
		}
	}
	q.Status.Conditions = append(keep, cond(corev1.PodInitialized), cond(corev1.ContainersReady), cond(corev1.PodReady))
	running := func(c corev1.Container) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}
	}
	q.Status.ContainerStatuses = nil
	for _, c := range q.Spec.Containers {
		q.Status.ContainerStatuses = append(q.Status.ContainerStatuses, running(c))
	}
	q.Status.InitContainerStatuses = nil
	for _, c := range q.Spec.InitContainers {
		s := running(c)
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			s.Ready, s.Started = false, ptr.To(false)
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
				StartedAt: now, FinishedAt: now}}
		}
		q.Status.InitContainerStatuses = append(q.Status.InitContainerStatuses, s)
	}
	if _, err := k.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil &&
		!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		k.logf("fake kubelet: status of %s/%s: %v", p.Namespace, p.Name, err)
	}
}
