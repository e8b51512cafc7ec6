package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// fakeInfo is a stat answer: a directory or a file.
type fakeInfo struct{ dir bool }

func (f fakeInfo) Name() string       { return "x" }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() os.FileMode  { return 0o755 }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return f.dir }
func (f fakeInfo) Sys() any           { return nil }

// the machine as the box sees it: what exists (true: a directory)
func fakeStat(exists map[string]bool) func(string) (os.FileInfo, error) {
	return func(p string) (os.FileInfo, error) {
		if d, ok := exists[p]; ok {
			return fakeInfo{d}, nil
		}
		return nil, os.ErrNotExist
	}
}

func TestHostPathsOfTheStacksPodTemplates(t *testing.T) {
	ds := map[string]any{"kind": "DaemonSet", "spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"volumes": []any{
			map[string]any{"name": "var-lib", "hostPath": map[string]any{"path": "/var/lib"}},
			map[string]any{"name": "lib", "hostPath": map[string]any{"path": "/home/kubernetes/bin", "type": "Directory"}},
			map[string]any{"name": "shm", "emptyDir": map[string]any{"medium": "Memory"}},
		}}}}}
	job := map[string]any{"kind": "Job", "spec": map[string]any{"tasks": []any{map[string]any{"template": map[string]any{
		"spec": map[string]any{"volumes": []any{map[string]any{"name": "d", "hostPath": map[string]any{"path": "/var/lib"}}}}}}}}}
	got := HostPaths([]Object{{U: &unstructured.Unstructured{Object: ds}}, {U: &unstructured.Unstructured{Object: job}}})
	if want := []string{"/home/kubernetes/bin", "/var/lib"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("HostPaths = %v, want %v", got, want)
	}
}

// gcp-dev's nccl-tcpxo-installer and device-injector, oci-dev's rdma-cni, azure-dev's peermem reloader: each hostPath
// gets an empty tmpfs of the node (over the path, or over its deepest existing ancestor when it is missing), or an
// overlay of the system directory a missing path lies in, except the kernel's, the node's own kubelet folder,
// files, and what would hide what the node runs from.
func TestPlanShadows(t *testing.T) {
	stat := fakeStat(map[string]bool{"/": true, "/var": true, "/var/lib": true, "/home": true, "/opt": true,
		"/lib": true, "/lib/modules": true, "/run": true, "/work": true, "/work/box": true, "/tmp": true,
		"/run/xtables.lock": false, "/srv": true, "/srv/data": true, "/var/run": true, "/etc": true})
	needed := []string{"/tmp/multinode-box-1/nodes/gpu-0", "/usr/lib/cni", "/work/box/conformance/bin/clusterbox"}
	got := planShadows([]string{"/dev", "/dev/infiniband", "/home/kubernetes/bin", "/lib/modules", "/opt/cni/bin",
		"/run/xtables.lock", "/var/lib", "/var/lib/kubelet/device-plugins", "/var/run/nri", "/work/box/data", "/srv/data/",
		"relative", "/lib/firmware", "/etc", "/nowhere/x"}, needed, stat)
	want := []HostPathShadow{
		{Path: "/dev", Kept: "the kernel's (devices, processes, sysfs): not files of this machine's disk"},
		{Path: "/dev/infiniband", Kept: "the kernel's (devices, processes, sysfs): not files of this machine's disk"},
		{Path: "/home/kubernetes/bin", Tmpfs: "/home"},
		{Path: "/lib/modules", Tmpfs: "/lib/modules"},
		{Path: "/opt/cni/bin", Tmpfs: "/opt"},
		{Path: "/run/xtables.lock", Kept: "/run/xtables.lock is not a directory"},
		{Path: "/var/lib", Tmpfs: "/var/lib"},
		{Path: "/var/lib/kubelet/device-plugins", Kept: "the node's own kubelet folder (its device-plugins folder is the node's already)"},
		{Path: "/var/run/nri", Overlay: "/var/run"},
		{Path: "/work/box/data", Kept: "a tmpfs over /work/box would hide /work/box/conformance/bin/clusterbox, which the node runs from"},
		{Path: "/srv/data/", Tmpfs: "/srv/data"},
		{Path: "relative", Kept: "not an absolute path"},
		// missing below a system directory (this machine has no /lib/modules; a real node does): an overlay of it
		{Path: "/lib/firmware", Overlay: "/lib"},
		// a system directory itself, and a missing path whose only existing ancestor is /: the machine's own
		{Path: "/etc", Kept: "a tmpfs over /etc would hide what the node runs from"},
		{Path: "/nowhere/x", Kept: "a tmpfs over / would hide what the node runs from"},
	}
	if !reflect.DeepEqual(got, want) {
		for i := range got {
			if i >= len(want) || got[i] != want[i] {
				t.Errorf("%d: got %+v", i, got[i])
			}
		}
		t.Fatalf("planShadows: %d entries, want %d", len(got), len(want))
	}
}

// gcp-dev's filestore.csi.storage.gke.io made a registration socket path of 108 bytes under the box's folder, one
// more than a unix socket path holds ("bind: invalid argument"): the sockets are named by a short hash.
func TestCSISocketsFitAUnixSocketPath(t *testing.T) {
	root := "/tmp/multinode-box-1410070128/try1/nodes/gpu-0/kubelet"
	for _, d := range []string{"filestore.csi.storage.gke.io", "file.csi.azure.com", "fsx.csi.aws.com",
		"a-csi-driver-with-a-name-as-long-as-a-dns-subdomain.example.com"} {
		e, r := csiSockets(root, d)
		for _, p := range []string{e, r} {
			if len(p) > 107 {
				t.Errorf("%s: %s is %d bytes, a unix socket path holds 107", d, p, len(p))
			}
		}
		if e2, r2 := csiSockets(root, d+"x"); e2 == e || r2 == r {
			t.Errorf("%s: same sockets as another driver", d)
		}
	}
}

// gcp-dev's fabric MutatingPolicy adds the tcpxo-daemon sidecar in a CEL expression: its image was not among the
// references the box's registry served, so the LWS pods on real nodes stayed in ImagePullBackOff.
func TestImageRefsOfAdmissionPolicies(t *testing.T) {
	mp := map[string]any{"kind": "MutatingPolicy", "spec": map[string]any{"mutations": []any{map[string]any{
		"patchType": "JSONPatch", "jsonPatch": map[string]any{"expression": "[JSONPatch{op: 'add', path: " +
			"'/spec/initContainers/-', value: {'name': dyn('tcpxo-daemon'), 'image': dyn('us-docker.pkg.dev/gce-ai-infra/" +
			"gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21'), 'restartPolicy': dyn('Always')}}]"}}}}}
	pod := map[string]any{"kind": "Pod", "spec": map[string]any{"containers": []any{map[string]any{"name": "a",
		"image": "docker.io/vllm/vllm-openai:v0.31.0-cu129", "args": []any{"--image-size", "echo 'image'"}}}}}
	got := ImageRefs([]Object{{U: &unstructured.Unstructured{Object: mp}}, {U: &unstructured.Unstructured{Object: pod}}})
	want := []string{"docker.io/vllm/vllm-openai:v0.31.0-cu129", "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ImageRefs = %v, want %v", got, want)
	}
}

// overlayDir in a mount namespace of its own (the test binary run again under `unshare -m`): the directory's files
// stay visible, the missing path is made in the node's upper layer, and the directory on this machine's disk is
// not changed.
func TestOverlayDirMakesThePathInTheNodesLayerOnly(t *testing.T) {
	if lower := os.Getenv("MULTINODE_OVERLAY_LOWER"); lower != "" {
		if why := overlayDir(os.Getenv("MULTINODE_OVERLAY_NODE"), lower, 0); why != "" {
			t.Fatalf("overlayDir: %s", why)
		}
		if err := os.MkdirAll(filepath.Join(lower, "modules", "6.1.0"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(lower, "libc.so")); err != nil {
			t.Fatalf("the directory's own file is hidden by the overlay: %v", err)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("mount namespaces need root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	lower, node := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(lower, "libc.so"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("unshare", "-m", "--propagation", "private", os.Args[0],
		"-test.run=^TestOverlayDirMakesThePathInTheNodesLayerOnly$", "-test.count=1")
	c.Env = append(os.Environ(), "MULTINODE_OVERLAY_LOWER="+lower, "MULTINODE_OVERLAY_NODE="+node)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("in a mount namespace of its own: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(lower, "modules")); !os.IsNotExist(err) {
		t.Fatalf("the path was made on this machine's disk, not in the node's layer (stat: %v)", err)
	}
	if _, err := os.Stat(filepath.Join(node, "hostpath-overlay", "0", "upper", "modules", "6.1.0")); err != nil {
		t.Fatalf("the path is not in the node's upper layer: %v", err)
	}
}
