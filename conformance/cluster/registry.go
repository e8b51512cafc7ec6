package main

// The box's registry (issue 42, images with `imagePullPolicy: Always`): a read-only OCI distribution API server
// in the box's process, inside its network namespace (registryAddr on the node bridge), serving the stand-in
// image (image.go: the same rootfs and stand-in layers, the same config per reference) under every reference the
// stack's objects name. Every real node's containerd sends every pull there, whatever the registry host of the
// reference: its CRI `config_path` names a hosts directory whose `_default/hosts.toml` has this server as the only
// host (containerd/containerd@v1.6.20 docs/hosts.md "Setup Default Mirror for All Registries";
// remotes/docker/config/config_unix.go:35 falls back to `_default` when no folder names the host). No pod spec
// changes: a pull the kubelet makes for policy Always (or for an image not imported) resolves here, and a
// reference the registry does not hold (a digest reference, a name no object of the stack carries) is answered
// 404 MANIFEST_UNKNOWN, which the kubelet reports as ErrImagePull "not found".
//
// Which registry host a request was for: containerd adds `?ns=<host of the reference>` to every request it sends
// to a host other than the reference's own (v1.6.20 remotes/docker/resolver.go:494 addNamespace, registry.go:79
// isProxy; fetcher.go:104,127), so `<ns>/<name>:<tag>` is the normalized reference (docker.io/library/x:latest).
// API: the OCI distribution spec v1.0 (opencontainers/distribution-spec@v1.0.0 spec.md: GET/HEAD
// /v2/<name>/manifests/<reference>, GET/HEAD /v2/<name>/blobs/<digest>, error codes MANIFEST_UNKNOWN and
// BLOB_UNKNOWN); only pull: every other method is 405.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// registryAddr: the box's registry, on the node bridge beside CoreDNS (10.2.0.254).
const registryAddr = "10.2.0.253:5000"

// OCI media types (opencontainers/image-spec@v1.0.2 media-types.md): the layers are plain tars, as in the archive.
const (
	mediaOCIManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaOCIConfig   = "application/vnd.oci.image.config.v1+json"
	mediaOCILayer    = "application/vnd.oci.image.layer.v1.tar"
)

// StandInContent: what WriteStandInArchive wrote, for the registry: the layers (digest, size, where the bytes
// are) and each reference's image config.
type StandInContent struct {
	Layers  []standInBlob
	Configs map[string][]byte // normalized reference (docker.io/library/x:latest) -> its image config
	// normalized reference -> its layers on top of the shared ones (the Ray layer of the images that run Ray)
	Extra map[string][]standInBlob
}

type standInBlob struct {
	Digest string
	Size   int64
	File   string // the bytes are in this file (the rootfs tar) ...
	Data   []byte // ... or here
}

var standInContent *StandInContent // set by WriteStandInArchive

// RegistryPull is one manifest request the registry answered.
type RegistryPull struct {
	Ref    string `json:"ref"`    // <ns>/<name>:<tag> or @<digest>
	Method string `json:"method"` // HEAD or GET
	Status int    `json:"status"`
	Digest string `json:"digest,omitempty"` // the manifest served
}

// RegistryView is what observed.json records of the registry.
type RegistryView struct {
	Address   string         `json:"address"`
	Held      []string       `json:"held"`      // the references it serves
	Manifests []RegistryPull `json:"manifests"` // every manifest request, in order
	Blobs     int            `json:"blobs"`     // blob requests answered 200
	Misses    []string       `json:"misses"`    // references asked for and not held
	Hosts     string         `json:"hostsToml"` // the _default/hosts.toml every real node's containerd reads
}

// Registry serves StandInContent.
type Registry struct {
	mu        sync.Mutex
	manifests map[string][]byte // reference -> manifest
	byDigest  map[string][]byte // manifest digest -> manifest
	blobs     map[string]standInBlob
	view      RegistryView
	srv       *http.Server
}

// NewRegistry builds every reference's manifest (config + the shared layers + the reference's own, if any).
func NewRegistry(c *StandInContent) (*Registry, error) {
	r := &Registry{manifests: map[string][]byte{}, byDigest: map[string][]byte{}, blobs: map[string]standInBlob{},
		view: RegistryView{Address: registryAddr, Held: []string{}, Manifests: []RegistryPull{}, Misses: []string{}}}
	var shared []map[string]any
	for _, l := range c.Layers {
		r.blobs[l.Digest] = l
		shared = append(shared, map[string]any{"mediaType": mediaOCILayer, "digest": l.Digest, "size": l.Size})
	}
	for ref, cfg := range c.Configs {
		layers := append([]map[string]any{}, shared...)
		for _, l := range c.Extra[ref] {
			r.blobs[l.Digest] = l
			layers = append(layers, map[string]any{"mediaType": mediaOCILayer, "digest": l.Digest, "size": l.Size})
		}
		d := sha256Digest(cfg)
		r.blobs[d] = standInBlob{Digest: d, Size: int64(len(cfg)), Data: cfg}
		m, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaOCIManifest,
			"config": map[string]any{"mediaType": mediaOCIConfig, "digest": d, "size": len(cfg)}, "layers": layers})
		if err != nil {
			return nil, err
		}
		r.manifests[ref] = m
		r.byDigest[sha256Digest(m)] = m
		r.view.Held = append(r.view.Held, ref)
	}
	sort.Strings(r.view.Held)
	return r, nil
}

// HostsToml: the `_default/hosts.toml` of every real node's containerd: this registry as the only host, plain
// HTTP, pull and resolve (containerd@v1.6.20 docs/hosts.md "server field", "capabilities field", "host field(s)").
// `server` is set so that no upstream is ever tried (remotes/docker/config/hosts.go:96-121 adds the reference's
// own host only when no server is configured); the [host] table is required: v1.6.20 refuses a hosts.toml
// without one ("invalid `host` tree", hosts.go:497 getSortedHosts) and then falls back to the upstream.
func HostsToml() string {
	return fmt.Sprintf("server = \"http://%[1]s\"\ncapabilities = [\"pull\", \"resolve\"]\n\n"+
		"[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", registryAddr)
}

// WriteHostsDir writes dir/_default/hosts.toml.
func WriteHostsDir(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "_default"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "_default", "hosts.toml"), []byte(HostsToml()), 0o644)
}

// Start listens on registryAddr (the address must exist in the namespace: StartRealNodes adds it to boxnodes).
func (r *Registry) Start() error {
	ln, err := net.Listen("tcp", registryAddr)
	if err != nil {
		return fmt.Errorf("the box's registry: %w", err)
	}
	r.view.Hosts = HostsToml()
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return nil
}

func (r *Registry) Stop() {
	if r != nil && r.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = r.srv.Shutdown(ctx)
	}
}

// View: a copy of what the registry recorded.
func (r *Registry) View() *RegistryView {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.view
	v.Manifests = append([]RegistryPull{}, r.view.Manifests...)
	v.Misses = append([]string{}, r.view.Misses...)
	return &v
}

func registryError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}

func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		registryError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "the box's registry is read-only")
		return
	}
	p := strings.TrimPrefix(req.URL.Path, "/v2/")
	if req.URL.Path == "/v2/" || req.URL.Path == "/v2" {
		w.WriteHeader(http.StatusOK)
		return
	}
	ns := req.URL.Query().Get("ns")
	if i := strings.LastIndex(p, "/manifests/"); i > 0 {
		r.serveManifest(w, req, ns, p[:i], p[i+len("/manifests/"):])
		return
	}
	if i := strings.LastIndex(p, "/blobs/"); i > 0 {
		r.serveBlob(w, req, p[i+len("/blobs/"):])
		return
	}
	registryError(w, http.StatusNotFound, "NAME_UNKNOWN", "not a pull request of the distribution API: "+req.URL.Path)
}

func (r *Registry) serveManifest(w http.ResponseWriter, req *http.Request, ns, name, ref string) {
	key := ns + "/" + name + ":" + ref
	if ns == "" {
		key = name + ":" + ref // a request without ns: containerd sent it to the reference's own host, i.e. us
	}
	var m []byte
	if strings.HasPrefix(ref, "sha256:") {
		key = strings.TrimSuffix(key, ":"+ref) + "@" + ref
		m = r.byDigest[ref]
	} else {
		m = r.manifests[key]
	}
	rec := RegistryPull{Ref: key, Method: req.Method, Status: http.StatusOK}
	defer func() {
		r.mu.Lock()
		r.view.Manifests = append(r.view.Manifests, rec)
		if rec.Status != http.StatusOK && !contains(r.view.Misses, key) {
			r.view.Misses = append(r.view.Misses, key)
		}
		r.mu.Unlock()
	}()
	if m == nil {
		rec.Status = http.StatusNotFound
		registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", fmt.Sprintf("the box's registry holds no image %s: "+
			"it serves the stand-in only under the references the stack's objects name, and not by digest", key))
		return
	}
	rec.Digest = sha256Digest(m)
	w.Header().Set("Content-Type", mediaOCIManifest)
	w.Header().Set("Docker-Content-Digest", rec.Digest)
	w.Header().Set("Content-Length", fmt.Sprint(len(m)))
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodGet {
		_, _ = w.Write(m)
	}
}

func (r *Registry) serveBlob(w http.ResponseWriter, req *http.Request, digest string) {
	b, ok := r.blobs[digest]
	if !ok {
		registryError(w, http.StatusNotFound, "BLOB_UNKNOWN", "the box's registry holds no blob "+digest)
		return
	}
	w.Header().Set("Docker-Content-Digest", digest)
	w.Header().Set("Content-Type", "application/octet-stream")
	r.mu.Lock()
	r.view.Blobs++
	r.mu.Unlock()
	if b.File == "" {
		http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(b.Data))
		return
	}
	f, err := os.Open(b.File)
	if err != nil {
		registryError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	defer f.Close()
	http.ServeContent(w, req, "", time.Time{}, f) // Range requests too (containerd resumes with them)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sha256Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

var (
	boxRegistry      *Registry // the running registry, stopped by StopRealNodes
	registryHostsDir string    // the containerd hosts directory naming it ("" without a registry)
)

// startBoxRegistry adds registryAddr to the node bridge, serves standInContent there and writes the hosts
// directory the real nodes' containerd reads.
func startBoxRegistry(boxDir string, logf func(string, ...any)) error {
	host, _, _ := net.SplitHostPort(registryAddr)
	if err := runCmd("ip", "addr", "add", host+"/32", "dev", "boxnodes"); err != nil {
		return err
	}
	r, err := NewRegistry(standInContent)
	if err != nil {
		return err
	}
	if err := r.Start(); err != nil {
		return err
	}
	dir := filepath.Join(boxDir, "registry-hosts")
	if err := WriteHostsDir(dir); err != nil {
		r.Stop()
		return err
	}
	boxRegistry, registryHostsDir = r, dir
	logf("the box's registry on %s: %d references (hosts dir %s)", registryAddr, len(r.view.Held), dir)
	return nil
}
