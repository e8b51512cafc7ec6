package main

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The PyTorch layer (issue 43): only the images whose containers launch torchrun / torch.distributed.run get it;
// those images are left out of the archive every node imports and served by the box's registry alone, with the
// layer on top of the shared ones and the box-only cap in their config.
func TestTorchImagesServedByTheRegistryOnly(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rootfs := write("rootfs.tar", "rootfs layer bytes")
	write("standin/bin/standin-entrypoint", "#!/bin/sh\n")
	torchTar := write("torch.tar", "torch layer bytes")
	job := &unstructured.Unstructured{Object: map[string]any{"kind": "Job", "spec": map[string]any{"template": map[string]any{
		"spec": map[string]any{
			"initContainers": []any{map[string]any{"name": "preflight", "image": "example/pre:1",
				"command": []any{"/bin/bash", "-c", "exec python3 -m torch.distributed.run --nnodes=2 x.py"}}},
			"containers": []any{
				map[string]any{"name": "trainer", "image": "example/train:2", "command": []any{"/bin/bash", "-c"},
					"args": []any{"torchrun --nnodes=2 --nproc_per_node=8 train.py"}},
				map[string]any{"name": "sidecar", "image": "example/side:3", "command": []any{"sleep", "inf"}}}}}}}}
	objects := []Object{{File: "Job.yaml", U: job}}
	defer func(a string, r map[string]bool, n int) { torchLayerTar, torchRefs, torchNprocMax = a, r, n }(torchLayerTar, torchRefs, torchNprocMax)
	torchLayerTar, torchRefs, torchNprocMax = torchTar, TorchRefs(objects), 2
	if len(torchRefs) != 2 || !torchRefs["example/pre:1"] || !torchRefs["example/train:2"] {
		t.Fatalf("TorchRefs: %v", torchRefs)
	}
	archive := filepath.Join(dir, "images.tar")
	if _, err := WriteStandInArchive(archive, rootfs, filepath.Join(dir, "standin"), ImageRefs(objects)); err != nil {
		t.Fatal(err)
	}
	// the archive: the pause image and the sidecar's image only, no PyTorch layer
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var tags, files []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		if h.Name == "manifest.json" {
			var ms []struct{ RepoTags []string }
			data, _ := io.ReadAll(tr)
			if err := json.Unmarshal(data, &ms); err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				tags = append(tags, m.RepoTags...)
			}
		}
	}
	sort.Strings(tags)
	if strings.Join(tags, " ") != "docker.io/example/side:3 registry.k8s.io/pause:3.10" {
		t.Fatalf("archive tags %v", tags)
	}
	for _, n := range files {
		if strings.HasPrefix(n, "torch/") {
			t.Fatalf("the PyTorch layer is in the archive: %v", files)
		}
	}
	// the registry's content: every reference, the PyTorch ones with the layer and the cap
	torchDigest := sha256Digest([]byte("torch layer bytes"))
	for _, ref := range []string{"docker.io/example/pre:1", "docker.io/example/train:2", "docker.io/example/side:3"} {
		cfg := standInContent.Configs[ref]
		var c struct {
			Config struct{ Env []string }
			RootFS struct {
				DiffIDs []string `json:"diff_ids"`
			} `json:"rootfs"`
		}
		if err := json.Unmarshal(cfg, &c); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		extra := standInContent.Extra[ref]
		capped := strings.Contains(strings.Join(c.Config.Env, " "), "MULTINODE_BOX_NPROC_MAX=2")
		if ref == "docker.io/example/side:3" {
			if len(extra) != 0 || len(c.RootFS.DiffIDs) != 2 || capped {
				t.Fatalf("%s: extra %v diff_ids %v env %v", ref, extra, c.RootFS.DiffIDs, c.Config.Env)
			}
			continue
		}
		if len(extra) != 1 || extra[0].Digest != torchDigest || len(c.RootFS.DiffIDs) != 3 ||
			c.RootFS.DiffIDs[2] != torchDigest || !capped {
			t.Fatalf("%s: extra %v diff_ids %v env %v", ref, extra, c.RootFS.DiffIDs, c.Config.Env)
		}
	}
}

// gcp-dev's device-injector names its image by digest: the stand-in is imported under a tag of its own and given
// the digest reference as a name in each node (digestAliases), so a kubelet that does not pull finds it; the
// registry serves neither (a pull by digest still misses: the stand-in cannot have that digest).
func TestDigestReferenceGetsTheStandInByName(t *testing.T) {
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs.tar")
	if err := os.WriteFile(rootfs, []byte("rootfs layer bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "standin", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "standin", "bin", "standin-entrypoint"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func(a map[string]string, c *StandInContent) { digestAliases, standInContent = a, c }(digestAliases, standInContent)
	digestAliases = map[string]string{}
	ref := "gcr.io/gke-release/nri-device-injector@sha256:6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970"
	skipped, err := WriteStandInArchive(filepath.Join(dir, "images.tar"), rootfs, filepath.Join(dir, "standin"), []string{ref, "ubuntu"})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 0 {
		t.Fatalf("skipped: %v", skipped)
	}
	alias := "gcr.io/gke-release/nri-device-injector:multinode-box-6e79483d52ab"
	if got := digestAliases[alias]; got != ref || len(digestAliases) != 1 {
		t.Fatalf("digestAliases = %v, want %s -> %s", digestAliases, alias, ref)
	}
	f, err := os.Open(filepath.Join(dir, "images.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var tags []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "manifest.json" {
			var ms []struct{ RepoTags []string }
			data, _ := io.ReadAll(tr)
			if err := json.Unmarshal(data, &ms); err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				tags = append(tags, m.RepoTags...)
			}
		}
	}
	if !strings.Contains(strings.Join(tags, " "), alias) {
		t.Fatalf("the archive's tags %v lack %s", tags, alias)
	}
	if _, ok := standInContent.Configs[alias]; ok {
		t.Fatalf("the registry serves the alias tag %s", alias)
	}
	if _, ok := standInContent.Configs["docker.io/library/ubuntu:latest"]; !ok {
		t.Fatalf("the registry lost the tag reference: %v", standInContent.Configs)
	}
}
