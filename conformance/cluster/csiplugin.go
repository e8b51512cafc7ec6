package main

// A stand-in CSI node plugin (issue 42, "every volume mounts"): no storage system runs in the box, so for each CSI
// driver the stack's PersistentVolumes name (fsx.csi.aws.com, efs.csi.aws.com, ..., and the box's own stand-in
// driver) each real node runs this plugin, registered with the kubelet through its plugin registry
// (<root-dir>/plugins_registry, k8s.io/kubelet@v0.33.13 pkg/apis/pluginregistration/v1) as the driver's node
// plugin (CSI spec v1.9.0). NodePublishVolume bind-mounts a folder of the box shared by every real node (one
// per volume handle: a network filesystem's sharing, not its bytes) onto the kubelet's target path, inside the
// node's mount namespace. A CSIDriver object with attachRequired false goes with it (no attacher runs here), as
// the drivers' charts create it. Only the storage is fake: the kubelet's volume manager, the mount into the
// container, readOnly and subPath are the real ones.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"
)

type CSIPlugin struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	registerapi.UnimplementedRegistrationServer
	driver, node string
	endpoint     string // the CSI socket
	volumes      string // the box's folder of volume contents, shared by the real nodes
	mountNSPid   func() int
	logf         func(string, ...any)
}

// CSIDrivers: the CSI drivers of the stack's PersistentVolumes plus the box's stand-in driver.
func CSIDrivers(objects []Object) []string {
	seen := map[string]bool{standInCSIDriver: true}
	for _, o := range objects {
		if o.U.GetKind() != "PersistentVolume" {
			continue
		}
		if d, ok, _ := unstructuredString(o.U.Object, "spec", "csi", "driver"); ok && d != "" {
			seen[d] = true
		}
	}
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	return out
}

// EnsureCSIDrivers creates a CSIDriver (attachRequired false) for each driver the stack does not define itself.
func EnsureCSIDrivers(ctx context.Context, client kubernetes.Interface, drivers []string) error {
	for _, d := range drivers {
		cd := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: d,
			Annotations: map[string]string{"box.multinode.dev/stand-in": "no storage system runs in the box"}},
			Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(false)}}
		if _, err := client.StorageV1().CSIDrivers().Create(ctx, cd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("CSIDriver %s: %w", d, err)
		}
	}
	return nil
}

// csiSockets: the driver's CSI endpoint and its registration socket under the node's kubelet root dir, named by a
// short hash of the driver: a unix socket path holds at most 107 bytes (sun_path is 108 with its NUL; Linux
// unix(7)), and <box dir>/try1/nodes/<node>/kubelet/plugins_registry/<driver>-reg.sock was 108 for gcp-dev's
// filestore.csi.storage.gke.io ("bind: invalid argument"). The kubelet learns the driver's name and endpoint from
// the registration reply, not from the file names (k8s.io/kubelet@v0.33.13 pkg/apis/pluginregistration/v1).
func csiSockets(kubeletRoot, driver string) (endpoint, registration string) {
	sum := sha256.Sum256([]byte(driver))
	base := "csi-" + hex.EncodeToString(sum[:4])
	return filepath.Join(kubeletRoot, "plugins", base, "csi.sock"), filepath.Join(kubeletRoot, "plugins_registry", base+"-reg.sock")
}

// Serve starts the CSI and the registration sockets under the node's kubelet root dir.
func (p *CSIPlugin) Serve(ctx context.Context, kubeletRoot string) error {
	endpoint, regSock := csiSockets(kubeletRoot, p.driver)
	for _, d := range []string{filepath.Dir(endpoint), filepath.Dir(regSock)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	p.endpoint = endpoint
	for _, s := range []struct {
		path string
		reg  func(*grpc.Server)
	}{
		{p.endpoint, func(g *grpc.Server) { csi.RegisterIdentityServer(g, p); csi.RegisterNodeServer(g, p) }},
		{regSock, func(g *grpc.Server) { registerapi.RegisterRegistrationServer(g, p) }},
	} {
		_ = os.Remove(s.path)
		l, err := net.Listen("unix", s.path)
		if err != nil {
			return err
		}
		g := grpc.NewServer()
		s.reg(g)
		go func() { _ = g.Serve(l) }()
		go func() { <-ctx.Done(); g.Stop() }()
	}
	return nil
}

// registration (the kubelet's plugin watcher)
func (p *CSIPlugin) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: p.driver, Endpoint: p.endpoint,
		SupportedVersions: []string{"1.0.0"}}, nil
}

func (p *CSIPlugin) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		p.logf("CSI stand-in %s on %s: the kubelet refused it: %s", p.driver, p.node, s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// identity
func (p *CSIPlugin) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: p.driver, VendorVersion: "box-stand-in"}, nil
}

func (p *CSIPlugin) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (p *CSIPlugin) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// node
func (p *CSIPlugin) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: p.node}, nil
}

func (p *CSIPlugin) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil // no STAGE_UNSTAGE: the kubelet publishes directly
}

// inNodeNS runs a command in the node's mount namespace (where the kubelet and containerd see its mounts).
func (p *CSIPlugin) inNodeNS(args ...string) error {
	cmd := exec.Command("nsenter", append([]string{fmt.Sprintf("--mount=/proc/%d/ns/mnt", p.mountNSPid()), "--"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (p *CSIPlugin) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	src := filepath.Join(p.volumes, strings.NewReplacer("/", "_", ":", "_").Replace(p.driver+"_"+r.VolumeId))
	if err := os.MkdirAll(src, 0o777); err != nil {
		return nil, err
	}
	if err := p.inNodeNS("mkdir", "-p", r.TargetPath); err != nil {
		return nil, err
	}
	if err := p.inNodeNS("mount", "--bind", src, r.TargetPath); err != nil {
		return nil, err
	}
	if r.Readonly {
		if err := p.inNodeNS("mount", "-o", "remount,bind,ro", r.TargetPath); err != nil {
			return nil, err
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (p *CSIPlugin) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	_ = p.inNodeNS("umount", r.TargetPath)
	_ = p.inNodeNS("rmdir", r.TargetPath)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
