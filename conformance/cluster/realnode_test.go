package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// criSetting reads one key of the CRI plugin's own table from the config containerd itself resolved
// (`containerd config dump`: the defaults merged with the file), so a key misspelt or put in another table reads
// as containerd's default.
func criSetting(t *testing.T, conf, key string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "containerd.toml")
	if err := os.WriteFile(f, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("containerd", "--config", f, "config", "dump").CombinedOutput()
	if err != nil {
		t.Fatalf("containerd config dump: %v: %s", err, out)
	}
	section := ""
	for _, line := range strings.Split(string(out), "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "[") {
			section = l
			continue
		}
		if k, v, ok := strings.Cut(l, "="); ok && section == `[plugins."io.containerd.grpc.v1.cri"]` && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s not in the CRI plugin's table of the dump:\n%s", key, out)
	return ""
}

// A pod sandbox's network namespace is pinned in the node's CRI state dir (on the nodes' tmpfs, gone with the
// box), not in the machine's /var/run/netns, where the pins of every box outlived it (the box stops containerd
// without the CNI teardown that removes them).
func TestContainerdPinsSandboxNetnsInItsStateDir(t *testing.T) {
	if _, err := exec.LookPath("containerd"); err != nil {
		t.Skip("containerd is not installed (conformance/realnode/install-deps.sh)")
	}
	conf := containerdConfig("/nonexistent/node", "/nonexistent/node/containerd/containerd.sock", "10.2.0.1")
	if v := criSetting(t, conf, "netns_mounts_under_state_dir"); v != "true" {
		t.Fatalf("netns_mounts_under_state_dir = %s as containerd reads the node's config, want true", v)
	}
	// the options the real nodes depend on, read back the same way
	if v := criSetting(t, conf, "restrict_oom_score_adj"); v != "true" {
		t.Errorf("restrict_oom_score_adj = %s, want true", v)
	}
}

// A real node's content store gets the blobs the first node imported as hard links (the nodes' folders are on one
// tmpfs): present blobs are kept, missing ones linked, the same inode (no copy).
func TestLinkBlobsHardLinksWhatIsMissing(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "blobs", "sha256")
	for name, data := range map[string]string{"aaa": "layer a", "bbb": "layer b"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "bbb"), []byte("its own"), 0o444); err != nil {
		t.Fatal(err)
	}
	n, err := linkBlobs(src, dst)
	if err != nil || n != 1 {
		t.Fatalf("linkBlobs = %d, %v; want 1 linked", n, err)
	}
	a, _ := os.Stat(filepath.Join(src, "aaa"))
	b, err := os.Stat(filepath.Join(dst, "aaa"))
	if err != nil || !os.SameFile(a, b) {
		t.Fatalf("aaa is not the same file in both stores: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dst, "bbb")); string(data) != "its own" {
		t.Fatalf("a blob the node had was replaced: %q", data)
	}
}
