package main

// Applying a stack's objects the way `pulumi up` does (server-side apply, field manager pulumi-kubernetes),
// waiting until the schedulers have acted, and taking a snapshot of what the cluster made of them.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

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
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func NewApplier(b *Box) *Applier {
	return &Applier{dyn: dynamic.NewForConfigOrDie(b.Config),
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(b.Client.Discovery()))}
}

// ReadObjects reads build/<stack>/k8s/*.yaml in file order (the apply order plan writes).
func ReadObjects(dir string) ([]Object, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
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
	deadline := time.Now().Add(wait)
	for {
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			return m, nil
		}
		if !meta.IsNoMatchError(err) || time.Now().After(deadline) {
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
	_, err = r.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(force)})
	if err != nil {
		return err
	}
	if u.GetKind() == "CustomResourceDefinition" {
		return a.waitEstablished(ctx, r, u.GetName())
	}
	return nil
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
	return p.Namespace + "/" + p.Name + "=" + s
}

// The schedulers running in the box, by the schedulerName pods give.
var boxSchedulers = map[string]bool{"": true, "default-scheduler": true}

// Settle waits until the pods stop changing for `quiet` and every pod is bound or marked unschedulable by a
// scheduler, or until `limit`. It returns whether that state was reached and how long it took.
func Settle(ctx context.Context, b *Box, quiet, limit time.Duration, minWait time.Duration) (bool, time.Duration, error) {
	start := time.Now()
	last, since := "", time.Now()
	for time.Since(start) < limit {
		if err := b.Failure(); err != nil {
			return false, time.Since(start), err
		}
		pods, err := b.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, time.Since(start), err
		}
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
			} else if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
				decided = false
			}
		}
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

func (a *Applier) Snapshot(ctx context.Context, b *Box) ([]PodView, []EventView, error) {
	pods, err := b.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	memo := map[string]string{}
	var out []PodView
	for _, p := range pods.Items {
		v := PodView{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase),
			Owner: a.TopOwner(ctx, p.Namespace, p.OwnerReferences, memo)}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				v.Scheduled = map[string]any{"status": string(c.Status), "reason": c.Reason, "message": c.Message}
			}
		}
		p.ManagedFields = nil
		raw, _ := json.Marshal(p)
		_ = json.Unmarshal(raw, &v.Pod)
		out = append(out, v)
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
		pods, _, err := a.Snapshot(ctx, b)
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
