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
	"regexp"
	"sort"
	"strings"

	"github.com/distribution/reference"
)

// the sandbox image of every real node's containerd (containerd.toml sandbox_image)
const pauseImage = "registry.k8s.io/pause:3.10"

// policyImage: an image an admission policy adds to pods, written inside one of its expressions: the CEL of a
// Kyverno MutatingPolicy's applyConfiguration or JSON patch (`'image': dyn('<ref>')`, gcp-dev's tcpxo-daemon
// sidecar) or a quoted "image": "<ref>" in a patch's text.
var policyImage = regexp.MustCompile(`['"]image['"]\s*:\s*(?:dyn\(\s*)?['"]([^'"\s]+)['"]`)

// ImageRefs: every container image the stack's objects name (any "image" string in a pod template, a
// LeaderWorkerSet's two templates, a Volcano Job's tasks ..., and the images an admission policy's expressions
// add to pods), normalized as containerd names them.
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
				if s, ok := x.(string); ok && strings.Contains(s, "image") {
					for _, m := range policyImage.FindAllStringSubmatch(s, -1) {
						seen[m[1]] = true
					}
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

// WriteStandInArchive writes the archive: the rootfs layer, the stand-in layer (every file of standinDir/bin as
// /usr/local/bin/<name>, mode 0755), one image config per reference (entrypoint: standin-entrypoint, which says
// so and sleeps, for a container that names no command), the pause image. Refs that are digests cannot be
// stood in for (the digest is the content); they are returned as skipped.
// digestAliases: the tag each digest reference's stand-in is imported under -> the digest reference (set by
// WriteStandInArchive; StartRealNodes names the image so in each node)
var digestAliases = map[string]string{}

func WriteStandInArchive(out, rootfsTar, standinDir string, refs []string) (skipped []string, err error) {
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
	// the same content for the box's registry (registry.go): the two layers, each reference's config, and the Ray
	// layer for the images given it (Extra)
	content := &StandInContent{Configs: map[string][]byte{}, Layers: []standInBlob{
		{Digest: rootDigest, Size: st.Size(), File: rootfsTar},
		{Digest: standDigest, Size: int64(len(layer2)), Data: layer2}}, Extra: map[string][]standInBlob{}}
	// layer 3, only for the images whose pods run Ray (gangs.go RayRefs): Ray from PyPI (ray-layer.sh); layer 4,
	// only for the images whose containers launch PyTorch (gangs.go TorchRefs): Debian's PyTorch (torch-layer.sh)
	rayBlob, err := extraLayer(tw, "ray/layer.tar", rayLayerTar, len(rayRefs) > 0)
	if err != nil {
		return nil, err
	}
	// The PyTorch images are left out of the archive every node imports: the box's registry alone serves them
	// (registry.go), so only the nodes whose pods run them pull them, and their pulls drop the layer blobs once
	// unpacked (containerd.toml discard_unpacked_layers): the layer (832 MB here) is kept once per node that runs it.
	torchBlob, err := extraLayer(nil, "", torchLayerTar, len(torchRefs) > 0)
	if err != nil {
		return nil, err
	}
	type manifest struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	var manifests []manifest
	configs := map[string][]byte{}
	config := func(ref string, entrypoint []string, diffIDs []string, ray, torch bool) (string, error) {
		env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MULTINODE_STANDIN_IMAGE=" + ref}
		if ray {
			// Ray's usage-stats report (on by default for `ray start --head`) would try to reach Ray's server
			env = append(env, "RAY_USAGE_STATS_ENABLED=0")
		}
		if torch && torchNprocMax > 0 {
			// the box-only cap on --nproc_per_node (torch_hooks.py applies it and says so)
			env = append(env, fmt.Sprintf("MULTINODE_BOX_NPROC_MAX=%d", torchNprocMax))
		}
		c := map[string]any{
			"architecture": "amd64", "os": "linux",
			"config": map[string]any{
				"Env":        env,
				"Entrypoint": entrypoint,
				"Labels":     map[string]string{"dev.multinode.box.stand-in-for": ref},
			},
			"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
		}
		data, err := json.Marshal(c)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(data)
		name := hex.EncodeToString(sum[:]) + ".json"
		configs[name] = data
		return name, addFile(name, data)
	}
	all := append([]string{pauseImage}, refs...)
	for _, ref := range all {
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			skipped = append(skipped, ref+": "+err.Error())
			continue
		}
		tag := ""
		if d, isDigest := named.(reference.Digested); isDigest {
			if torchRefs[ref] {
				skipped = append(skipped, ref+": a digest reference of an image the registry alone serves (the stand-in's content cannot have that digest)")
				continue
			}
			// imported under a tag of its own, then given the digest reference as a name in each node's image store
			// (realnode.go, `ctr images tag`): the kubelet finds it present and does not pull (the policy of a digest
			// reference defaults to IfNotPresent); a pull of it would still miss (the content is not that digest)
			tag = named.Name() + ":multinode-box-" + d.Digest().Encoded()[:12]
			digestAliases[tag] = named.String()
		} else {
			tag = reference.TagNameOnly(named).String()
		}
		entry := []string{"/usr/local/bin/standin-entrypoint"}
		if ref == pauseImage {
			entry = []string{"/usr/local/bin/standin-pause"}
		}
		diffIDs, layers := []string{rootDigest, standDigest}, []string{"rootfs/layer.tar", "standin/layer.tar"}
		ray, torch := rayBlob != nil && rayRefs[ref], torchBlob != nil && torchRefs[ref]
		for _, x := range []struct {
			on   bool
			blob *standInBlob
			file string
		}{{ray, rayBlob, "ray/layer.tar"}, {torch, torchBlob, "torch/layer.tar"}} {
			if x.on {
				diffIDs, layers = append(diffIDs, x.blob.Digest), append(layers, x.file)
				content.Extra[tag] = append(content.Extra[tag], *x.blob)
			}
		}
		name, err := config(ref, entry, diffIDs, ray, torch)
		if err != nil {
			return nil, err
		}
		if !torch {
			manifests = append(manifests, manifest{Config: name, RepoTags: []string{tag}, Layers: layers})
		}
		if _, alias := digestAliases[tag]; !alias {
			content.Configs[tag] = configs[name] // the registry serves no digest reference (nor its alias tag)
		}
	}
	data, err := json.Marshal(manifests)
	if err != nil {
		return nil, err
	}
	if err := addFile("manifest.json", data); err != nil {
		return nil, err
	}
	standInContent = content
	return skipped, tw.Close()
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
	// standinDir/root/** at the same path in the image (the programs rendered commands name by absolute path,
	// e.g. /opt/nim/start-mpi-cluster.sh), with the file's own mode
	rootDir := filepath.Join(dir, "root")
	_ = filepath.Walk(rootDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(rootDir, p)
			entries = append(entries, entry{p, rel})
		}
		return nil
	})
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
		if st, err := os.Stat(e.src); strings.HasPrefix(e.dst, "usr/local/bin/") || (err == nil && st.Mode()&0o111 != 0) {
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

// the Ray layer (conformance/realnode/ray-layer.sh, --ray-layer) and the references that get it (RayRefs)
var rayLayerTar string
var rayRefs = map[string]bool{}

// the PyTorch layer (conformance/realnode/torch-layer.sh, --torch-layer), the references that get it (TorchRefs)
// and the box-only cap on torchrun's --nproc_per_node in those images (--torch-nproc-max; 0: none)
var torchLayerTar string
var torchRefs = map[string]bool{}
var torchNprocMax int

// extraLayer: the layer tar at src for the registry when it is given and some image needs it (want), also added
// to the archive as name when tw is not nil.
func extraLayer(tw *tar.Writer, name, src string, want bool) (*standInBlob, error) {
	if src == "" || !want {
		return nil, nil
	}
	st, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	var digest string
	if tw != nil {
		digest, err = addTarFile(tw, name, src)
	} else {
		digest, err = fileDigest(src)
	}
	if err != nil {
		return nil, err
	}
	return &standInBlob{Digest: digest, Size: st.Size(), File: src}, nil
}

func fileDigest(src string) (string, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// addTarFile copies the file at src into the archive as name and returns its sha256 digest ("sha256:...").
func addTarFile(tw *tar.Writer, name, src string) (string, error) {
	st, err := os.Stat(src)
	if err != nil {
		return "", err
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
