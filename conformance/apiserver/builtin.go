package main

// The API server's CREATE path for built-in kinds, as a library (k8s.io/kubernetes at the version in go.mod).
//
// What kube-apiserver does with `kubectl create --validate=strict` / `fieldValidation=Strict`
// (k8s.io/apiserver@v0.33.13 pkg/endpoints/handlers/create.go:119-139):
//   decoder := scope.Serializer.DecoderToVersion(s.StrictSerializer, scope.HubGroupVersion)
//   obj, gvk, err := decoder.Decode(body, &defaultGVK, original)   // strict errors are fatal under Strict
// The decoder is a versioning codec: decode the versioned object (unknown and duplicate fields are strict
// errors), apply the scheme's defaulters, convert to the internal ("hub") version. The object then goes to
// the generic registry's Store.Create (k8s.io/apiserver@v0.33.13 pkg/registry/generic/registry/store.go:
// 478-501): rest.FillObjectMetaSystemFields, then rest.BeforeCreate(strategy, ctx, obj), which runs the
// resource's PrepareForCreate, Validate (the group's validation.Validate<Kind> with the options the strategy
// picks), ObjectMeta validation, warnings and Canonicalize. We call exactly those, with the real strategies
// of k8s.io/kubernetes/pkg/registry/<group>/<resource>.
//
// Not run (no server here): admission plugins (mutating/validating webhooks, LimitRanger, ServiceAccount,
// PodSecurity, ResourceQuota...), the RBAC escalation check of the rbac storage wrappers, the
// managed-fields update, and storage (name conflicts, resourceVersion).

import (
	"context"
	"fmt"
	"sort"

	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/capabilities"

	// Every group our stacks render, installed into legacyscheme (types, defaulters, conversions).
	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"

	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingwebhookconfiguration"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingwebhookconfiguration"
	"k8s.io/kubernetes/pkg/registry/apps/daemonset"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/apps/statefulset"
	"k8s.io/kubernetes/pkg/registry/autoscaling/horizontalpodautoscaler"
	"k8s.io/kubernetes/pkg/registry/batch/job"
	"k8s.io/kubernetes/pkg/registry/core/configmap"
	"k8s.io/kubernetes/pkg/registry/core/namespace"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolume"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/kubernetes/pkg/registry/core/podtemplate"
	"k8s.io/kubernetes/pkg/registry/core/secret"
	"k8s.io/kubernetes/pkg/registry/core/service"
	"k8s.io/kubernetes/pkg/registry/core/serviceaccount"
	"k8s.io/kubernetes/pkg/registry/networking/networkpolicy"
	"k8s.io/kubernetes/pkg/registry/policy/poddisruptionbudget"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrole"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding"
	"k8s.io/kubernetes/pkg/registry/rbac/role"
	"k8s.io/kubernetes/pkg/registry/rbac/rolebinding"
	"k8s.io/kubernetes/pkg/registry/scheduling/priorityclass"
	"k8s.io/kubernetes/pkg/registry/storage/storageclass"
)

func init() {
	// kube-apiserver --allow-privileged: the flag defaults to false, every cluster we target runs with
	// true (kubeadm: k8s.io/kubernetes@v1.33.13 cmd/kubeadm/app/phases/controlplane/manifests.go:181
	// `allow-privileged: true`; EKS/GKE/AKS/OKE run privileged device plugins). kube-apiserver applies it
	// the same way (cmd/kube-apiserver/app/server.go:209: capabilities.Setup(opts.AllowPrivileged, ...));
	// pod validation reads it.
	capabilities.Setup(true, 0)
}

// apiextensionsScheme serves CustomResourceDefinition objects (the apiextensions-apiserver's own group).
var apiextensionsScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	apiextensionsinstall.Install(s)
	return s
}()

// createStrategies maps each built-in kind the stacks render to the strategy its REST storage uses on create
// (the `Strategy` var of each k8s.io/kubernetes/pkg/registry/<group>/<resource> package; the CRD's from
// k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition). A kind missing here is reported
// as a finding, never skipped in silence.
var createStrategies = map[schema.GroupKind]rest.RESTCreateStrategy{
	{Group: "", Kind: "ConfigMap"}:                                                  configmap.Strategy,
	{Group: "", Kind: "Namespace"}:                                                  namespace.Strategy,
	{Group: "", Kind: "PersistentVolume"}:                                           persistentvolume.Strategy,
	{Group: "", Kind: "PersistentVolumeClaim"}:                                      persistentvolumeclaim.Strategy,
	{Group: "", Kind: "Pod"}:                                                        pod.Strategy,
	{Group: "", Kind: "PodTemplate"}:                                                podtemplate.Strategy,
	{Group: "", Kind: "Secret"}:                                                     secret.Strategy,
	{Group: "", Kind: "Service"}:                                                    service.Strategy,
	{Group: "", Kind: "ServiceAccount"}:                                             serviceaccount.Strategy,
	{Group: "apps", Kind: "DaemonSet"}:                                              daemonset.Strategy,
	{Group: "apps", Kind: "Deployment"}:                                             deployment.Strategy,
	{Group: "apps", Kind: "StatefulSet"}:                                            statefulset.Strategy,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}:                         horizontalpodautoscaler.Strategy,
	{Group: "batch", Kind: "Job"}:                                                   job.Strategy,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:                             networkpolicy.Strategy,
	{Group: "policy", Kind: "PodDisruptionBudget"}:                                  poddisruptionbudget.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       clusterrole.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                clusterrolebinding.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                              role.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:                       rolebinding.Strategy,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             priorityclass.Strategy,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 storageclass.Strategy,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   mutatingwebhookconfiguration.Strategy,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: validatingwebhookconfiguration.Strategy,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               customresourcedefinition.NewStrategy(apiextensionsScheme),
}

// schemeFor returns the scheme that serves gvk: the legacy scheme of k8s.io/kubernetes, or the
// apiextensions scheme for CRDs. nil: not a built-in kind.
func schemeFor(gvk schema.GroupVersionKind) *runtime.Scheme {
	if legacyscheme.Scheme.Recognizes(gvk) {
		return legacyscheme.Scheme
	}
	if apiextensionsScheme.Recognizes(gvk) {
		return apiextensionsScheme
	}
	return nil
}

// decodeStrict runs the API server's decode for a Strict create: the YAML media type's StrictSerializer
// wrapped by DecoderToVersion(…, internal version of the group), i.e. decode + default + convert.
// It returns the internal object and the strict errors (unknown/duplicate fields) as findings. Like the
// versioning codec, a strict error still yields the decoded object: under Strict the request stops there,
// under the default (Warn, handlers/rest.go:410-415) it goes on without the field. We go on too, so that
// one run shows every problem of an object.
func decodeStrict(s *runtime.Scheme, doc []byte, gvk schema.GroupVersionKind) (runtime.Object, []issue) {
	codecs := serializer.NewCodecFactory(s)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeYAML)
	if !ok || info.StrictSerializer == nil {
		return nil, []issue{{Path: "", Msg: "no strict YAML serializer in the scheme (apicheck bug)"}}
	}
	hub := schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal}
	decoder := codecs.DecoderToVersion(info.StrictSerializer, hub)
	obj, _, err := decoder.Decode(doc, nil, nil)
	if err != nil {
		if strictErr, isStrict := runtime.AsStrictDecodingError(err); isStrict {
			var out []issue
			for _, e := range strictErr.Errors() {
				out = append(out, strictIssue(e))
			}
			return obj, out
		}
		return nil, []issue{{Path: "", Msg: "decode: " + err.Error()}}
	}
	return obj, nil
}

// createContext is the request context the handler builds: the namespace of the request (kubectl and the
// Pulumi provider send a namespaced object to its own namespace's URL) and a warning recorder.
func createContext(ns string) (context.Context, *warningRecorder) {
	rec := &warningRecorder{}
	ctx := genericapirequest.WithNamespace(context.Background(), ns)
	ctx = warning.WithWarningRecorder(ctx, rec)
	return ctx, rec
}

type warningRecorder struct{ msgs []string }

func (w *warningRecorder) AddWarning(agent, text string) { w.msgs = append(w.msgs, text) }

// beforeCreate is Store.create's preamble: FillObjectMetaSystemFields (uid, creationTimestamp) then
// rest.BeforeCreate with the strategy. Errors come back as the API server's field causes.
func beforeCreate(strategy rest.RESTCreateStrategy, obj runtime.Object) (issues []issue, warnings []string) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return []issue{{Msg: "no object metadata: " + err.Error()}}, nil
	}
	ns := ""
	if strategy.NamespaceScoped() {
		ns = accessor.GetNamespace()
		if ns == "" {
			ns = "default" // what kubectl and the provider use for a namespaced object without one
		}
	}
	ctx, rec := createContext(ns)
	rest.FillObjectMetaSystemFields(accessor)
	if err := rest.BeforeCreate(strategy, ctx, obj); err != nil {
		return statusIssues(err), rec.msgs
	}
	return nil, rec.msgs
}

var serviceCreate func(ctx context.Context, obj runtime.Object) (runtime.Object, error)

// createService runs the Service REST storage's dry-run create (storage.go): BeginCreate, then BeforeCreate.
func createService(obj runtime.Object) ([]issue, []string) {
	if serviceCreate == nil {
		c, err := serviceCreater()
		if err != nil {
			return []issue{{Msg: "building the Service REST storage: " + err.Error()}}, nil
		}
		serviceCreate = c
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return []issue{{Msg: err.Error()}}, nil
	}
	ns := accessor.GetNamespace()
	if ns == "" {
		ns = "default"
	}
	ctx, rec := createContext(ns)
	if _, err := serviceCreate(ctx, obj); err != nil {
		return statusIssues(err), rec.msgs
	}
	return nil, rec.msgs
}

// checkBuiltin runs one built-in object through decode → default → convert → BeforeCreate.
func checkBuiltin(doc []byte, gvk schema.GroupVersionKind) (runtime.Object, []issue, []string) {
	s := schemeFor(gvk)
	strategy, ok := createStrategies[gvk.GroupKind()]
	if !ok {
		known := make([]string, 0, len(createStrategies))
		for gk := range createStrategies {
			known = append(known, gk.String())
		}
		sort.Strings(known)
		return nil, []issue{{Msg: fmt.Sprintf("apicheck has no CREATE strategy wired for %s: add its pkg/registry strategy to createStrategies (builtin.go)", gvk.GroupKind())}}, nil
	}
	obj, issues := decodeStrict(s, doc, gvk)
	if obj == nil {
		return nil, issues, nil
	}
	if gvk.GroupKind() == (schema.GroupKind{Kind: "Service"}) {
		verrs, warnings := createService(obj)
		return obj, append(issues, verrs...), warnings
	}
	verrs, warnings := beforeCreate(strategy, obj)
	return obj, append(issues, verrs...), warnings
}
