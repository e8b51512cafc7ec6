package main

// Applying a stack's objects the way `pulumi up` does (server-side apply, field manager pulumi-kubernetes),
// waiting until the schedulers have acted, and taking a snapshot of what the cluster made of them.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/multinode/conformance/k8sfiles"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// pulumi-kubernetes applies with this field manager (the provider's default name).
const fieldManager = "pulumi-kubernetes"

// Object is one file of build/<stack>/k8s (or one CRD the box adds).
type Object struct {
	File string
	U    *unstructured.Unstructured
}

func (o Object) Key() string {
	ns := o.U.GetNamespace()
	if ns != "" {
		ns += "/"
	}
	return o.U.GetKind() + " " + ns + o.U.GetName()
}

type Applier struct {
	dyn        dynamic.Interface
	mapper     *restmapper.DeferredDiscoveryRESTMapper
	notServed  map[schema.GroupKind]bool // waited for once: later objects of the kind fail at once
	kyverno    bool                      // Kyverno runs: wait for each CEL policy to be ready
	kyvernoURL string                    // https://127.0.0.1:<port> of Kyverno's webhook server
}

func NewApplier(b *Box) *Applier {
	return &Applier{dyn: dynamic.NewForConfigOrDie(b.Config), notServed: map[schema.GroupKind]bool{},
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(b.Client.Discovery()))}
}

// eachMap calls visit on every JSON object (map) inside the objects, at any depth: pod templates of any kind
// (Deployments, LWS templates, Volcano tasks, MPIJob replica specs) are found without knowing their paths.
func eachMap(objects []Object, visit func(m map[string]any)) {
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			visit(t)
			for _, x := range t {
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	for _, o := range objects {
		walk(o.U.Object)
	}
}

// ReadObjects reads build/<stack>/k8s/*.yaml in the apply order plan writes (k8s/apply-order.txt).
func ReadObjects(dir string) ([]Object, error) {
	files, err := k8sfiles.OrderedYAMLFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []Object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, Object{File: f, U: &unstructured.Unstructured{Object: m}})
	}
	return out, nil
}

func (a *Applier) mapping(u *unstructured.Unstructured, wait time.Duration) (*meta.RESTMapping, error) {
	gvk := u.GroupVersionKind()
	if a.notServed[gvk.GroupKind()] {
		wait = 0
	}
	deadline := time.Now().Add(wait)
	for {
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			return m, nil
		}
		if !meta.IsNoMatchError(err) || time.Now().After(deadline) {
			if meta.IsNoMatchError(err) {
				a.notServed[gvk.GroupKind()] = true
			}
			return nil, err
		}
		time.Sleep(time.Second)
		a.mapper.Reset()
	}
}

func (a *Applier) resource(u *unstructured.Unstructured, wait time.Duration) (dynamic.ResourceInterface, error) {
	m, err := a.mapping(u, wait)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := u.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		return a.dyn.Resource(m.Resource).Namespace(ns), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

// Apply server-side applies one object. A kind the API server does not serve is waited for (a CRD applied
// just before is being established) up to `wait`.
func (a *Applier) Apply(ctx context.Context, o Object, wait time.Duration) error {
	u := o.U.DeepCopy()
	if _, ok := u.Object["status"]; ok {
		delete(u.Object, "status")
	}
	r, err := a.resource(u, wait)
	if err != nil {
		return err
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	// pulumi-kubernetes forces conflicts only where the object says pulumi.com/patchForce (multinode/manifests/crds.py
	// PATCH_FORCE); on a fresh cluster there is nothing to conflict with anyway.
	force := u.GetAnnotations()["pulumi.com/patchForce"] == "true"
	// A server-side apply is idempotent, so a request the API server could not finish (etcd's "request timed out"
	// on a loaded machine, a 504) is sent again, at most twice: the object is then refused for what it is, not for
	// the machine's load.
	for attempt := 0; ; attempt++ {
		_, err = r.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(force)})
		if err == nil || attempt == 2 || !transientServerError(err) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if err != nil {
		return err
	}
	if u.GetKind() == "CustomResourceDefinition" {
		return a.waitEstablished(ctx, r, u.GetName())
	}
	if a.kyverno && u.GroupVersionKind().Group == "policies.kyverno.io" {
		return a.waitPolicyReady(ctx, r, u.GetName())
	}
	return nil
}

// waitPolicyReady waits until Kyverno reports a CEL policy ready (its webhook configured): the workloads applied
// after it must meet it at admission, as they do when Kyverno's chart has been installed long before.
// github.com/kyverno/api (kyverno@v1.19.0's pin) api/policies.kyverno.io/v1/conditions.go: WebhookConfigured;
// v1alpha1/conditions.go: ConditionStatus.Ready.
func (a *Applier) waitPolicyReady(ctx context.Context, r dynamic.ResourceInterface, name string) error {
	deadline := time.Now().Add(120 * time.Second)
	var last any
	for time.Now().Before(deadline) {
		got, err := r.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			ready, _, _ := unstructured.NestedBool(got.Object, "status", "conditionStatus", "ready")
			if ready && a.webhooksServed(ctx, got.GetKind()) {
				// The API server reads webhook configurations through an informer, Kyverno its policies through
				// its policy cache: give both a moment (seen here: a pod created 3s after "ready" was not mutated
				// once in three runs). A miss cannot pass silently: compare.py then finds the pod differs from effective/.
				time.Sleep(10 * time.Second)
				return nil
			}
			last, _, _ = unstructured.NestedFieldCopy(got.Object, "status")
		}
		time.Sleep(time.Second)
	}
	data, _ := json.Marshal(last)
	return fmt.Errorf("policy not ready within 120s (Kyverno's status: %s)", data)
}

func (a *Applier) waitEstablished(ctx context.Context, r dynamic.ResourceInterface, name string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		got, err := r.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				cm, _ := c.(map[string]any)
				if cm["type"] == "Established" && cm["status"] == "True" {
					a.mapper.Reset()
					return nil
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("CRD %s not Established within 60s", name)
}

// webhooksServed: a webhook configuration of the policy's kind (mutating for a MutatingPolicy, validating
// otherwise) has a webhook whose URL is Kyverno's loopback server. Kyverno may report a policy ready before
// its webhook configuration lists it (seen here: a pod created right after "ready" was not mutated).
func (a *Applier) webhooksServed(ctx context.Context, kind string) bool {
	res := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1",
		Resource: "validatingwebhookconfigurations"}
	if strings.Contains(kind, "Mutating") {
		res.Resource = "mutatingwebhookconfigurations"
	}
	list, err := a.dyn.Resource(res).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, c := range list.Items {
		hooks, _, _ := unstructured.NestedSlice(c.Object, "webhooks")
		for _, h := range hooks {
			hm, _ := h.(map[string]any)
			url, _, _ := unstructured.NestedString(hm, "clientConfig", "url")
			rules, _, _ := unstructured.NestedSlice(hm, "rules")
			if a.kyvernoURL != "" && strings.HasPrefix(url, a.kyvernoURL) && len(rules) > 0 {
				return true
			}
		}
	}
	return false
}

func (a *Applier) Delete(ctx context.Context, o Object) error {
	r, err := a.resource(o.U, 0)
	if err != nil {
		return err
	}
	err = r.Delete(ctx, o.U.GetName(), metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// TopOwner follows a pod's controller owner references up to the object nobody owns: "Kind ns/name".
func (a *Applier) TopOwner(ctx context.Context, ns string, refs []metav1.OwnerReference, memo map[string]string) string {
	var ref *metav1.OwnerReference
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			ref = &refs[i]
		}
	}
	if ref == nil && len(refs) > 0 {
		ref = &refs[0]
	}
	if ref == nil {
		return ""
	}
	key := ref.APIVersion + "/" + ref.Kind + "/" + ns + "/" + ref.Name
	if v, ok := memo[key]; ok {
		return v
	}
	here := ref.Kind + " " + ns + "/" + ref.Name
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gv.WithKind(ref.Kind))
	u.SetNamespace(ns)
	result := here
	if r, err := a.resource(u, 0); err == nil {
		if got, err := r.Get(ctx, ref.Name, metav1.GetOptions{}); err == nil {
			if up := a.TopOwner(ctx, ns, got.GetOwnerReferences(), memo); up != "" {
				result = up
			}
		}
	}
	memo[key] = result
	return result
}

// PodView is one pod as the cluster holds it.
type PodView struct {
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	Owner     string         `json:"owner"`
	Node      string         `json:"node"`
	Phase     string         `json:"phase"`
	Scheduled map[string]any `json:"scheduled,omitempty"`
	Pod       map[string]any `json:"pod"`
	// on a real node: each running container's environment as its process holds it (/proc/<pid>/environ)
	Env map[string]map[string]string `json:"env,omitempty"`
	// on a real node: each running container's command line as its process holds it (/proc/<pid>/cmdline)
	Cmdline map[string][]string `json:"cmdline,omitempty"`
	// on a real node with CoreDNS: the host names the pod carries, resolved from inside it (names.go)
	Names []NameCheck `json:"names,omitempty"`
	// on a real node: the TCP ports something listens on in the pod's network namespace (/proc/<pid>/net/tcp{,6})
	Listening []int `json:"listening"`
	// on a real node: each container's last log lines, and the gang verdict lines of its stand-ins (gangs.go)
	Logs map[string][]string `json:"logs,omitempty"`
	Gang []string            `json:"gang,omitempty"`
	// on a real node: each container's whole log as the box kept it (podlogs.go), by container
	LogFiles map[string]string `json:"logFiles,omitempty"`
	// a real-node pod deleted during the phase, before its snapshot: why, and that the view is its last one
	Gone string `json:"gone,omitempty"`
}

type EventView struct {
	Object  string `json:"object"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Source  string `json:"source"`
	Count   int32  `json:"count"`
}

func podKey(p corev1.Pod) string {
	s := p.Spec.NodeName + "|" + string(p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			s += "|" + string(c.Status) + c.Reason
		}
	}
	if p.DeletionTimestamp != nil {
		s += "|deleting"
	}
	if realNodeNames[p.Spec.NodeName] {
		for _, c := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			// the kubelet's back-off alternates ErrImagePull and ImagePullBackOff: one state for a pull that fails
			s += "|" + c.Name + ":" + strings.Replace(settleState(c), "ImagePullBackOff", "ErrImagePull", 1)
		}
	}
	return p.Namespace + "/" + p.Name + "=" + s
}

// The schedulers running in the box, by the schedulerName pods give.
var boxSchedulers = map[string]bool{"": true, "default-scheduler": true}

// Settle waits until the pods stop changing for `quiet` and every pod is bound or marked unschedulable by a
// scheduler, or until `limit`. It returns whether that state was reached and how long it took.
func Settle(ctx context.Context, b *Box, quiet, limit time.Duration, minWait time.Duration) (bool, time.Duration, error) {
	start := time.Now()
	last, since := "", time.Now()
	dyn, _ := dynamic.NewForConfig(b.Config) // Volcano's PodGroups (none listed when the kind is not served)
	for time.Since(start) < limit {
		if err := b.Failure(); err != nil {
			return false, time.Since(start), err
		}
		pods, err := b.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, time.Since(start), err
		}
		notePods(pods.Items) // the phase's real-node pods, for those their controller deletes (podlogs.go)
		keys, decided := []string{}, true
		for _, p := range pods.Items {
			keys = append(keys, podKey(p))
			if !boxSchedulers[p.Spec.SchedulerName] {
				continue // no scheduler of the box will ever act on it (compare.py lists it as not checked)
			}
			if p.Spec.NodeName == "" {
				unsched := false
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
						unsched = true
					}
				}
				decided = decided && unsched
			} else if realNodeNames[p.Spec.NodeName] {
				// a PyTorch launcher still running (a gang forming: volcano-llm-training's 32-rank preflight, an init
				// container, kept its pods Pending past the settle limit) is waited for by waitGangs, bounded
				decided = decided && (realPodDecided(p) || torchRunning(p))
			} else if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
				decided = false
			}
		}
		var waiting []string
		if dyn != nil {
			if groups, err := dyn.Resource(podGroupsGVR).List(ctx, metav1.ListOptions{}); err == nil {
				waiting = gangsAwaitingPods(groups.Items, pods.Items)
			}
		}
		keys = append(keys, waiting...)
		// bounded: a gang whose pods never come (admission refuses them) is judged as before, after gangPodsWait
		decided = decided && (len(waiting) == 0 || time.Since(start) >= gangPodsWait)
		sort.Strings(keys)
		now := strings.Join(keys, ";")
		if now != last {
			last, since = now, time.Now()
		}
		if decided && time.Since(since) >= quiet && time.Since(start) >= minWait {
			return true, time.Since(start), nil
		}
		time.Sleep(time.Second)
	}
	return false, time.Since(start), nil
}

// gangsAwaitingPods names the Volcano PodGroups admitted past Pending whose pods are not all there yet: Volcano's
// job controller creates a job's pods only once its PodGroup has left Pending (volcano.sh/volcano@v1.14.1
// pkg/controllers/job/job_controller_actions.go:405-408, syncTask), so until then the phase is not settled, however
// quiet the pods are. Seen on the 512-node box at load ~45: the PodGroup Inqueue, no pod yet after the 8 s quiet,
// and the 64-pod gang judged "held back whole". A pod belongs to the group its scheduling.k8s.io/group-name
// annotation names (volcano.sh/apis@v1.14.0 pkg/apis/scheduling/v1beta1/labels.go:32 KubeGroupNameAnnotationKey).
// Only Inqueue (admitted, its pods not made yet) is waited for, and at most gangPodsWait from the start of Settle:
// a PodGroup still Pending (not admitted: too few resources), Running, or without a phase counts as decided, as
// before, and so does a gang whose pods never come (an admission webhook refusing them) once that time is up.
const gangPodsWait = 45 * time.Second // inside Settle's 90 s limit (main.go -settle), so the old judgment still comes

func gangsAwaitingPods(groups []unstructured.Unstructured, pods []corev1.Pod) []string {
	have := map[string]int64{}
	for _, p := range pods {
		if g := p.Annotations["scheduling.k8s.io/group-name"]; g != "" && p.DeletionTimestamp == nil {
			have[p.Namespace+"/"+g]++
		}
	}
	var out []string
	for _, g := range groups {
		phase, _, _ := unstructured.NestedString(g.Object, "status", "phase")
		want, _, _ := unstructured.NestedInt64(g.Object, "spec", "minMember")
		key := g.GetNamespace() + "/" + g.GetName()
		if phase != "Inqueue" || have[key] >= want {
			continue
		}
		out = append(out, fmt.Sprintf("podgroup %s=%s %d/%d pods", key, phase, have[key], want))
	}
	sort.Strings(out)
	return out
}

func (a *Applier) Snapshot(ctx context.Context, b *Box) ([]PodView, []EventView, error) {
	return a.snapshot(ctx, b, true)
}

// snapshot: withNames resolves the real-node pods' host names from inside them (names.go; a phase's snapshot,
// not the polls of WaitGone).
func (a *Applier) snapshot(ctx context.Context, b *Box, withNames bool) ([]PodView, []EventView, error) {
	pods, err := b.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	memo := map[string]string{}
	var world *nameWorld
	if withNames && corednsBin != "" && len(realNodeNames) > 0 {
		if world, err = readNameWorld(ctx, b.Client); err != nil {
			return nil, nil, err
		}
	}
	var out []PodView
	for _, p := range pods.Items {
		v := PodView{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase),
			Owner: a.TopOwner(ctx, p.Namespace, p.OwnerReferences, memo)}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				v.Scheduled = map[string]any{"status": string(c.Status), "reason": c.Reason, "message": c.Message}
			}
		}
		if realNodeNames[p.Spec.NodeName] {
			v.Env, v.Cmdline, v.Listening = containerEnvs(ctx, p)
			v.Names = CheckNames(ctx, world, p, v.Env, v.Cmdline)
			if withNames {
				syncPodLogs()
				v.Logs, v.Gang, v.LogFiles = podLogs(p, logTail)
			}
		}
		p.ManagedFields = nil
		raw, _ := json.Marshal(p)
		_ = json.Unmarshal(raw, &v.Pod)
		out = append(out, v)
	}
	if withNames {
		// real-node pods their controller deleted during the phase, as last seen (podlogs.go gonePods)
		for _, p := range gonePods(pods.Items) {
			v := PodView{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase),
				Owner: a.TopOwner(ctx, p.Namespace, p.OwnerReferences, memo), LogFiles: goneLogFiles(p),
				Gone: "deleted during the phase (by its controller); as last seen before its deletion began"}
			p.ManagedFields = nil
			raw, _ := json.Marshal(p)
			_ = json.Unmarshal(raw, &v.Pod)
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	evs, err := b.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	var events []EventView
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeNormal && e.Reason != "SuccessfulCreate" {
			continue
		}
		events = append(events, EventView{Object: e.InvolvedObject.Kind + " " + e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name,
			Type: e.Type, Reason: e.Reason, Message: e.Message, Source: e.Source.Component + e.ReportingController, Count: e.Count})
	}
	return out, events, nil
}

// WaitGone waits until no pod has the given top owner (bounded).
func (a *Applier) WaitGone(ctx context.Context, b *Box, owner string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		pods, _, err := a.snapshot(ctx, b, false)
		if err == nil {
			left := 0
			for _, p := range pods {
				if p.Owner == owner {
					left++
				}
			}
			if left == 0 {
				return true
			}
		}
		time.Sleep(time.Second)
	}
	return false
}

// containerState: running, waiting:<reason>, terminated:<reason>:<exit code>
func containerState(c corev1.ContainerStatus) string {
	switch {
	case c.State.Running != nil:
		return "running"
	case c.State.Terminated != nil:
		return fmt.Sprintf("terminated:%s:%d", c.State.Terminated.Reason, c.State.Terminated.ExitCode)
	case c.State.Waiting != nil:
		return "waiting:" + c.State.Waiting.Reason
	}
	return "unknown"
}

// settleState: containerState, except for a container in a crash loop (waiting in CrashLoopBackOff, or restarted
// after an error and running or failed again): the loop goes round running, terminated:Error and
// waiting:CrashLoopBackOff with a back-off of 10 s doubling up to 5 min (k8s.io/kubernetes@v1.33.13
// pkg/kubelet/kubelet.go:217 backOffPeriod, :158 MaxCrashLoopBackOff), which kept a phase with a crash-looping
// DaemonSet pod from being quiet for --quiet until the settle limit; one state for all of it.
func settleState(c corev1.ContainerStatus) string {
	if c.State.Waiting != nil && c.State.Waiting.Reason == "CrashLoopBackOff" {
		return "crash-loop"
	}
	last := c.LastTerminationState.Terminated
	if c.RestartCount > 0 && last != nil && last.ExitCode != 0 &&
		(c.State.Running != nil || c.State.Terminated != nil && c.State.Terminated.ExitCode != 0) {
		return "crash-loop"
	}
	return containerState(c)
}

// realPodDecided: a pod on a real node has come to rest: Running with every container running (each init
// container completed), Succeeded, Failed, or a container held in a state the kubelet will not leave by itself
// (an error waiting reason: CrashLoopBackOff, CreateContainerConfigError, ErrImageNeverPull, ...).
func realPodDecided(p corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return true
	}
	all := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, c := range all {
		if c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "ContainerCreating" &&
			c.State.Waiting.Reason != "PodInitializing" {
			return true
		}
		if c.State.Terminated != nil && c.State.Terminated.ExitCode != 0 {
			return true
		}
	}
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

// transientServerError: the API server or its etcd timed out (not a refusal of the object).
func transientServerError(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || strings.Contains(err.Error(), "etcdserver: request timed out")
}
