package main

// The Service REST storage, for the one built-in kind whose Store.Create changes the object before
// validation: its BeginCreate hook (k8s.io/kubernetes@v1.33.13 pkg/registry/core/service/storage/
// storage.go:359-386) syncs clusterIP/clusterIPs and runs the IP and node-port allocators, and only then
// does rest.BeforeCreate validate. We run the real REST storage (NewREST with in-memory allocators) with a
// dry-run create, on a storage backend that holds nothing: with dryRun the generic store only asks the
// backend whether the key exists (k8s.io/apiserver@v0.33.13 pkg/registry/generic/registry/dryrun.go:39-45),
// and nothing is allocated for real.

import (
	"context"
	"errors"
	"net"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"
	servicestorage "k8s.io/kubernetes/pkg/registry/core/service/storage"
)

// emptyStorage is a storage backend with no objects: Get says NotFound (what a dry-run create asks);
// anything that would write or list is an error (a dry-run create never does).
type emptyStorage struct{}

var errNoWrite = errors.New("apicheck: the empty storage refuses writes (dry-run only)")

func (emptyStorage) Versioner() storage.Versioner { return storage.APIObjectVersioner{} }
func (emptyStorage) Create(context.Context, string, runtime.Object, runtime.Object, uint64) error {
	return errNoWrite
}
func (emptyStorage) Delete(context.Context, string, runtime.Object, *storage.Preconditions, storage.ValidateObjectFunc, runtime.Object, storage.DeleteOptions) error {
	return errNoWrite
}
func (emptyStorage) Watch(context.Context, string, storage.ListOptions) (watch.Interface, error) {
	return nil, errNoWrite
}
func (emptyStorage) Get(_ context.Context, key string, _ storage.GetOptions, _ runtime.Object) error {
	return storage.NewKeyNotFoundError(key, 0)
}
func (emptyStorage) GetList(context.Context, string, storage.ListOptions, runtime.Object) error {
	return errNoWrite
}
func (emptyStorage) GuaranteedUpdate(context.Context, string, runtime.Object, bool, *storage.Preconditions, storage.UpdateFunc, runtime.Object) error {
	return errNoWrite
}
func (emptyStorage) Count(string) (int64, error)                               { return 0, nil }
func (emptyStorage) ReadinessCheck() error                                     { return nil }
func (emptyStorage) RequestWatchProgress(context.Context) error                { return nil }
func (emptyStorage) GetCurrentResourceVersion(context.Context) (uint64, error) { return 1, nil }

func emptyRESTOptions(gr schema.GroupResource, gv schema.GroupVersion) generic.RESTOptions {
	return generic.RESTOptions{
		StorageConfig: &storagebackend.ConfigForResource{
			Config:        storagebackend.Config{Codec: legacyscheme.Codecs.LegacyCodec(gv)},
			GroupResource: gr,
		},
		Decorator: func(*storagebackend.ConfigForResource, string, func(runtime.Object) (string, error), func() runtime.Object,
			func() runtime.Object, storage.AttrFunc, storage.IndexerFuncs, *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
			return emptyStorage{}, func() {}, nil
		},
		ResourcePrefix: "/" + gr.Resource,
	}
}

// serviceCreater is the Service REST storage as kube-apiserver builds it for a single-stack IPv4 cluster
// with kube-apiserver's default ranges: DefaultServiceIPCIDR 10.0.0.0/24 and DefaultServiceNodePortRange
// 30000-32767 (k8s.io/kubernetes@v1.33.13 pkg/kubeapiserver/options/options.go:27,30; that package is not
// imported because it pulls in every admission plugin).
func serviceCreater() (func(ctx context.Context, obj runtime.Object) (runtime.Object, error), error) {
	_, cidr, _ := net.ParseCIDR("10.0.0.0/24")
	ips, err := ipallocator.NewInMemory(cidr)
	if err != nil {
		return nil, err
	}
	ports, err := portallocator.NewInMemory(utilnet.PortRange{Base: 30000, Size: 2768})
	if err != nil {
		return nil, err
	}
	rest, _, _, err := servicestorage.NewREST(emptyRESTOptions(api.Resource("services"), schema.GroupVersion{Version: "v1"}),
		api.IPv4Protocol, map[api.IPFamily]ipallocator.Interface{api.IPv4Protocol: ips}, ports, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
		return rest.Create(ctx, obj, nil, &metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	}, nil
}
