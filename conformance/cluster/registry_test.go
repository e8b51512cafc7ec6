package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The box's registry answers containerd's pull requests (as containerd v1.6.20 sends them to a `_default` mirror:
// `?ns=<the reference's host>`) for the references it holds, and 404 MANIFEST_UNKNOWN for any other.
func TestRegistryServesHeldReferencesOnly(t *testing.T) {
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs.tar")
	if err := os.WriteFile(rootfs, []byte("rootfs layer bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	layer2 := []byte("stand-in layer bytes")
	cfg := []byte(`{"architecture":"amd64","os":"linux"}`)
	c := &StandInContent{Configs: map[string][]byte{"public.ecr.aws/hpc-cloud/nccl-tests:latest": cfg},
		Layers: []standInBlob{{Digest: sha256Digest([]byte("rootfs layer bytes")), Size: 18, File: rootfs},
			{Digest: sha256Digest(layer2), Size: int64(len(layer2)), Data: layer2}}}
	r, err := NewRegistry(c)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	defer srv.Close()

	resp, err := http.Head(srv.URL + "/v2/hpc-cloud/nccl-tests/manifests/latest?ns=public.ecr.aws")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	digest := resp.Header.Get("Docker-Content-Digest")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != mediaOCIManifest || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("HEAD manifest: %d %v", resp.StatusCode, resp.Header)
	}
	// the manifest by digest, and it names the config and both layers
	resp, err = http.Get(srv.URL + "/v2/hpc-cloud/nccl-tests/manifests/" + digest + "?ns=public.ecr.aws")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Config struct{ Digest string }
		Layers []struct {
			Digest    string
			MediaType string
			Size      int64
		}
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(body, &m); err != nil || sha256Digest(body) != digest {
		t.Fatalf("manifest by digest: %v %s", err, body)
	}
	if m.Config.Digest != sha256Digest(cfg) || len(m.Layers) != 2 || m.Layers[0].MediaType != mediaOCILayer || m.Layers[0].Size != 18 {
		t.Fatalf("manifest: %+v", m)
	}
	for want, d := range map[string]string{"rootfs layer bytes": m.Layers[0].Digest, string(layer2): m.Layers[1].Digest, string(cfg): m.Config.Digest} {
		resp, err := http.Get(srv.URL + "/v2/hpc-cloud/nccl-tests/blobs/" + d + "?ns=public.ecr.aws")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(got) != want {
			t.Fatalf("blob %s: %d %q", d, resp.StatusCode, got)
		}
	}
	// not held: another tag, another host with the same path, a digest of no manifest of ours
	for _, u := range []string{"/v2/hpc-cloud/nccl-tests/manifests/v2?ns=public.ecr.aws",
		"/v2/hpc-cloud/nccl-tests/manifests/latest?ns=docker.io",
		"/v2/hpc-cloud/nccl-tests/manifests/sha256:" + strings.Repeat("0", 64) + "?ns=public.ecr.aws"} {
		resp, err := http.Get(srv.URL + u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || !strings.Contains(string(body), "MANIFEST_UNKNOWN") {
			t.Fatalf("%s: %d %s", u, resp.StatusCode, body)
		}
	}
	resp, err = http.Post(srv.URL+"/v2/hpc-cloud/nccl-tests/blobs/uploads/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("push: %d", resp.StatusCode)
	}
	v := r.View()
	if len(v.Manifests) != 5 || len(v.Misses) != 3 || v.Blobs != 3 ||
		v.Misses[2] != "public.ecr.aws/hpc-cloud/nccl-tests@sha256:"+strings.Repeat("0", 64) {
		t.Fatalf("view: %+v", v)
	}
	if !strings.Contains(HostsToml(), `server = "http://10.2.0.253:5000"`) || !strings.Contains(HostsToml(), `[host."http://10.2.0.253:5000"]`) {
		t.Fatal(HostsToml())
	}
}
