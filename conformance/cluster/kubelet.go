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

// heartbeatEvery: how often the fake kubelet renews each node's Lease. The real kubelet renews its Lease every 10 s (a
// quarter of the 40 s lease); here a quarter of the box's node-monitor grace period (controlplane.go), so a busy
// machine does not make a healthy node look dead. The Lease alone keeps a node healthy: the node lifecycle controller
// moves a node's probe time forward whenever its Lease's renewTime does ("Always update the probe time if node lease
// is renewed", k8s.io/kubernetes@v1.33.13 pkg/controller/nodelifecycle/node_lifecycle_controller.go:915-923).
const heartbeatEvery = 5 * time.Second

// statusEvery: how often NodeStatus is posted (its conditions' heartbeat times). The real kubelet posts it on change
// or every nodeStatusReportFrequency, 5 min by default (k8s.io/kubernetes@v1.33.13 pkg/kubelet/apis/config/v1beta1/
// defaults.go). The fake kubelet used to post it with every Lease renewal: at 512 nodes that was 1,024 more requests
// every 5 s (a Get and an UpdateStatus per node), each Node update fanned out to every informer of the box
// (scheduler, controllers, Volcano, LWS, Kyverno), for nothing the lifecycle controller needs (above).
const statusEvery = 5 * time.Minute

type FakeKubelet struct {
	client kubernetes.Interface
	nodes  map[string]bool
	// nodes whose kubelet is stopped (daytwo.go node failure): no Lease or NodeStatus heartbeat, no pod touched
	stopped map[string]bool
	// nodes whose kubelet runs but reports Ready=False (daytwo.go, the not-ready node): their Lease is renewed, their
	// pods' deletions finished, their NodeStatus not made healthy again
	sick   map[string]bool
	mu     sync.Mutex
	nextIP int
	logf   func(string, ...any)
	// each node's Lease as last written (renewed with one Update, no Get) and its InternalIP (pod hostIP)
	leases  map[string]*coordinationv1.Lease
	hostIPs map[string]string
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
	k.nodes, k.stopped, k.sick = map[string]bool{}, map[string]bool{}, map[string]bool{}
	k.leases, k.hostIPs = map[string]*coordinationv1.Lease{}, map[string]string{}
	k.mu.Unlock()
	return k.AddNodes(ctx, nodes, 0)
}

// AddNodes registers more nodes (a pool's surge nodes, a repaired node: daytwo.go); first numbers their addresses.
func (k *FakeKubelet) AddNodes(ctx context.Context, nodes []corev1.Node, first int) error {
	renewed := time.Now()
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
		// one request: the API server keeps a Node's status on create ("Nodes allow *all* fields, including status,
		// to be set on create", k8s.io/kubernetes@v1.33.13 pkg/registry/core/node/strategy.go:95); a Get and an
		// UpdateStatus used to follow, 1,024 more requests at 512 nodes
		if _, err := k.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		k.mu.Lock()
		k.nodes[n.Name], k.stopped[n.Name], k.sick[n.Name] = true, false, false
		k.hostIPs[n.Name] = status.Addresses[0].Address
		delete(k.leases, n.Name) // a node registered again (daytwo.go repair) gets its Lease read afresh
		k.mu.Unlock()
		// Registering 512 nodes takes longer than the node-monitor grace period on a busy machine: the Leases of
		// the nodes registered so far are renewed meanwhile (each node's own is made at once), or the lifecycle
		// controller would find the first ones silent before the last one exists.
		if err := k.renewLease(ctx, n.Name); err != nil {
			return fmt.Errorf("lease %s: %w", n.Name, err)
		}
		if time.Since(renewed) >= heartbeatEvery {
			if err := k.renew(ctx, false); err != nil {
				return err
			}
			renewed = time.Now()
		}
	}
	return k.renew(ctx, false)
}

// postStatus posts a live node's NodeStatus with every condition healthy and fresh: what a kubelet does when its
// status changed, here when the lifecycle controller marked a node Unknown after a late heartbeat (a busy machine)
// while its fake kubelet still runs.
func (k *FakeKubelet) postStatus(ctx context.Context, name string) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = nodeConditions(metav1.Now())
		_, err = k.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		k.logf("fake kubelet: status of node %s: %v", name, err)
	}
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
	delete(k.sick, name)
}

// notReadyConditions: the conditions of a node whose kubelet runs and reports that it cannot run pods (its container
// runtime or network down): Ready False, the pressures as before.
func notReadyConditions(now metav1.Time) []corev1.NodeCondition {
	cs := nodeConditions(now)
	cs[0].Status, cs[0].Reason = corev1.ConditionFalse, "KubeletNotReady"
	cs[0].Message = "fake kubelet of the multinode cluster box: the node reports that it cannot run pods (day two)"
	return cs
}

// SetNotReady: the node's kubelet keeps renewing its Lease and posts Ready=False. The node lifecycle controller then
// sees a node that reports, not a silent one, and taints it node.kubernetes.io/not-ready (daytwo.go).
func (k *FakeKubelet) SetNotReady(ctx context.Context, name string) error {
	k.mu.Lock()
	k.sick[name] = true
	k.mu.Unlock()
	return k.postConditions(ctx, name, notReadyConditions)
}

// SetReady: the fault cleared; the kubelet posts Ready=True again and, as its status manager does, reports the pods it
// still runs there Ready (the node lifecycle controller marked them not Ready when the node went NotReady).
func (k *FakeKubelet) SetReady(ctx context.Context, name string) error {
	k.mu.Lock()
	k.sick[name] = false
	k.mu.Unlock()
	if err := k.postConditions(ctx, name, nodeConditions); err != nil {
		return err
	}
	pods, err := k.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		changed := false
		now := metav1.Now()
		for j := range p.Status.Conditions {
			c := &p.Status.Conditions[j]
			if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status != corev1.ConditionTrue {
				c.Status, c.LastTransitionTime, c.Reason, c.Message, changed = corev1.ConditionTrue, now, "", "", true
			}
		}
		if !changed {
			continue
		}
		if _, err := k.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil &&
			!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s/%s ready again: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

func (k *FakeKubelet) postConditions(ctx context.Context, name string, conds func(metav1.Time) []corev1.NodeCondition) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = conds(metav1.Now())
		_, err = k.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// reportsNotReady: the node's kubelet runs and reports Ready=False (SetNotReady)
func (k *FakeKubelet) reportsNotReady(node string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sick[node]
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

// renew renews every live node's Lease and, with status, posts every live node's NodeStatus (heartbeat times).
func (k *FakeKubelet) renew(ctx context.Context, status bool) error {
	for _, name := range k.live() {
		if err := k.renewLease(ctx, name); err != nil {
			return fmt.Errorf("lease %s: %w", name, err)
		}
		if !status {
			continue
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

// renewLease: one Update of the Lease as last written; a Get only for a node seen the first time or on a conflict.
func (k *FakeKubelet) renewLease(ctx context.Context, name string) error {
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	k.mu.Lock()
	l := k.leases[name]
	k.mu.Unlock()
	now := metav1.NewMicroTime(time.Now())
	var err error
	if l == nil {
		l, err = leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			l, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime: &now}}, metav1.CreateOptions{})
			if err == nil {
				k.keepLease(name, l)
			}
			return err
		}
		if err != nil {
			return err
		}
	}
	l = l.DeepCopy()
	l.Spec.RenewTime = &now
	updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		k.keepLease(name, nil) // written by someone else, or deleted: read it afresh next time
		return nil
	}
	if err == nil {
		k.keepLease(name, updated)
	}
	return err
}

func (k *FakeKubelet) keepLease(name string, l *coordinationv1.Lease) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l == nil {
		delete(k.leases, name)
	} else {
		k.leases[name] = l
	}
}

// Run keeps leases fresh and acts on the pods bound to the nodes until ctx ends.
func (k *FakeKubelet) Run(ctx context.Context) {
	go func() {
		// every heartbeatEvery, well inside the controller-manager's --node-monitor-grace-period (controlplane.go)
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		lastStatus := time.Now() // registration posted the first NodeStatus
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				status := time.Since(lastStatus) >= statusEvery
				if status {
					lastStatus = time.Now()
				}
				if err := k.renew(ctx, status); err != nil && ctx.Err() == nil {
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
	// a live node the lifecycle controller found silent (Ready not True): its status posted again at once
	notReady := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok || !k.runs(n.Name) || k.reportsNotReady(n.Name) {
			return
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				go k.postStatus(ctx, n.Name)
				return
			}
		}
	}
	_, _ = f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: notReady,
		UpdateFunc: func(_, o any) { notReady(o) }})
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
	k.mu.Lock()
	q.Status.HostIP = k.hostIPs[p.Spec.NodeName] // the node's InternalIP, as registered (AddNodes)
	k.mu.Unlock()
	if q.Status.HostIP != "" {
		q.Status.HostIPs = []corev1.HostIP{{IP: q.Status.HostIP}}
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
