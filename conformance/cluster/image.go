package main

// The stand-in images (issue 42, "images without a registry"): one root filesystem built from Debian packages
// (conformance/realnode/rootfs.sh: debootstrap, cached by its recipe) plus a second layer with the stand-in
// commands of conformance/realnode/standin/ (each says in its output that it stands in), tagged with every image
// reference the stack's objects name, so no pod spec changes for the box. Written as a `docker save` archive
// (manifest.json with RepoTags; containerd@v1.6.20 pkg/archive/importer reads that layout), which
// `ctr images import` loads into each real node's containerd. The pause image is the same filesystem with a
// command that sleeps until it is stopped.

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/distribution/reference"
)

// the sandbox image of every real node's containerd (containerd.toml sandbox_image)
const pauseImage = "registry.k8s.io/pause:3.10"

// ImageRefs: every container image the stack's objects name (any "image" string in a pod template, a
// LeaderWorkerSet's two templates, a Volcano Job's tasks ...), normalized as containerd names them.
func ImageRefs(objects []Object) []string {
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				if s, ok := x.(string); ok && k == "image" && s != "" {
					seen[s] = true
					continue
				}
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
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// TorchImageRefs: the images of the containers that launch PyTorch (a command or args word naming torchrun or
// torch.distributed.run: the trainers' launchers, the NCCL preflight; gangs.go launchesTorch): these get the
// PyTorch layer (rootfs.sh torch-layer.tar, Debian's python3-torch) between the rootfs and the stand-in layer;
// the others do not carry it.
func TorchImageRefs(objects []Object) map[string]bool {
	out := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			if img, ok := t["image"].(string); ok && img != "" {
				for _, k := range []string{"command", "args"} {
					words, _ := t[k].([]any)
					var ws []string
					for _, w := range words {
						if s, ok := w.(string); ok {
							ws = append(ws, s)
						}
					}
					if launchesTorch(ws) {
						out[img] = true
					}
				}
			}
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
	return out
}

// torchNprocMax: the box-only cap on torchrun's --nproc_per_node (--torch-nproc-max; 0: none), given to the
// PyTorch images as MULTINODE_BOX_NPROC_MAX in their config's Env (standin/python/multinode_box_torch applies it)
var torchNprocMax int

// WriteStandInArchive writes the archive: the rootfs layer, the PyTorch layer for the refs in torch, the stand-in layer (every file of standinDir/bin as
// /usr/local/bin/<name>, mode 0755), one image config per reference (entrypoint: standin-entrypoint, which says
// so and sleeps, for a container that names no command), the pause image. Refs that are digests cannot be
// stood in for (the digest is the content); they are returned as skipped.
func WriteStandInArchive(out, rootfsTar, standinDir string, refs []string, torch map[string]bool) (skipped []string, err error) {
	f, err := os.Create(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	addFile := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	// layer 1: the rootfs tar as it is, its digest computed while copying
	st, err := os.Stat(rootfsTar)
	if err != nil {
		return nil, fmt.Errorf("stand-in rootfs: %w (conformance/realnode/rootfs.sh builds it)", err)
	}
	rf, err := os.Open(rootfsTar)
	if err != nil {
		return nil, err
	}
	defer rf.Close()
	if err := tw.WriteHeader(&tar.Header{Name: "rootfs/layer.tar", Mode: 0o644, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tw, h), rf); err != nil {
		return nil, err
	}
	rootDigest := "sha256:" + hex.EncodeToString(h.Sum(nil))
	// layer 1b: PyTorch (rootfs.sh writes it beside the rootfs), only when an image needs it
	torchDigest := ""
	if len(torch) > 0 {
		if torchDigest, err = addLayerFile(tw, "torch/layer.tar", filepath.Join(filepath.Dir(rootfsTar), "torch-layer.tar")); err != nil {
			return nil, err
		}
	}
	// layer 2: the stand-in commands
	layer2, err := standInLayer(standinDir)
	if err != nil {
		return nil, err
	}
	s2 := sha256.Sum256(layer2)
	standDigest := "sha256:" + hex.EncodeToString(s2[:])
	if err := addFile("standin/layer.tar", layer2); err != nil {
		return nil, err
	}
	type manifest struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	var manifests []manifest
	config := func(ref string, entrypoint []string, withTorch bool) (string, error) {
		env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MULTINODE_STANDIN_IMAGE=" + ref}
		diffs := []string{rootDigest, standDigest}
		if withTorch {
			diffs = []string{rootDigest, torchDigest, standDigest}
			if torchNprocMax > 0 {
				env = append(env, fmt.Sprintf("MULTINODE_BOX_NPROC_MAX=%d", torchNprocMax))
			}
		}
		c := map[string]any{
			"architecture": "amd64", "os": "linux",
			"config": map[string]any{
				"Env":        env,
				"Entrypoint": entrypoint,
				"Labels":     map[string]string{"dev.multinode.box.stand-in-for": ref},
			},
			"rootfs": map[string]any{"type": "layers", "diff_ids": diffs},
		}
		data, err := json.Marshal(c)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(data)
		name := hex.EncodeToString(sum[:]) + ".json"
		return name, addFile(name, data)
	}
	all := append([]string{pauseImage}, refs...)
	for _, ref := range all {
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			skipped = append(skipped, ref+": "+err.Error())
			continue
		}
		if _, isDigest := named.(reference.Digested); isDigest {
			skipped = append(skipped, ref+": a digest reference (the stand-in's content cannot have that digest)")
			continue
		}
		tag := reference.TagNameOnly(named).String()
		entry := []string{"/usr/local/bin/standin-entrypoint"}
		if ref == pauseImage {
			entry = []string{"/usr/local/bin/standin-pause"}
		}
		name, err := config(ref, entry, torch[ref])
		if err != nil {
			return nil, err
		}
		layers := []string{"rootfs/layer.tar", "standin/layer.tar"}
		if torch[ref] {
			layers = []string{"rootfs/layer.tar", "torch/layer.tar", "standin/layer.tar"}
		}
		manifests = append(manifests, manifest{Config: name, RepoTags: []string{tag}, Layers: layers})
	}
	data, err := json.Marshal(manifests)
	if err != nil {
		return nil, err
	}
	if err := addFile("manifest.json", data); err != nil {
		return nil, err
	}
	return skipped, tw.Close()
}

// addLayerFile copies the layer tar at src into the archive as name and returns its diff ID (sha256 of the tar).
func addLayerFile(tw *tar.Writer, name, src string) (string, error) {
	st, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("stand-in layer: %w (conformance/realnode/rootfs.sh builds it)", err)
	}
	f, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tw, h), f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// standInLayer: standinDir/bin/* as /usr/local/bin/* (mode 0755), standinDir/python/** under Debian's
// site directory for local modules, /usr/local/lib/python3.11/dist-packages (bookworm's python3 is 3.11).
func standInLayer(dir string) ([]byte, error) {
	var b strings.Builder
	tw := tar.NewWriter(&b)
	files, err := filepath.Glob(filepath.Join(dir, "bin", "*"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no stand-in commands in %s/bin", dir)
	}
	type entry struct{ src, dst string }
	var entries []entry
	for _, f := range files {
		entries = append(entries, entry{f, "usr/local/bin/" + filepath.Base(f)})
	}
	pyRoot := filepath.Join(dir, "python")
	_ = filepath.Walk(pyRoot, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(pyRoot, p)
			entries = append(entries, entry{p, "usr/local/lib/python3.11/dist-packages/" + rel})
		}
		return nil
	})
	sort.Slice(entries, func(i, j int) bool { return entries[i].dst < entries[j].dst })
	dirs := map[string]bool{}
	for _, e := range entries {
		parts := strings.Split(filepath.Dir(e.dst), "/")
		for i := range parts {
			d := strings.Join(parts[:i+1], "/") + "/"
			if !dirs[d] {
				dirs[d] = true
				if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
					return nil, err
				}
			}
		}
		data, err := os.ReadFile(e.src)
		if err != nil {
			return nil, err
		}
		mode := int64(0o644)
		if strings.HasPrefix(e.dst, "usr/local/bin/") {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.dst, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}
