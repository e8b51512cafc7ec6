package main

// hostPath volumes on real nodes (issue 42, "nothing leaves the box"). The pods' hostPath volumes are the
// directories of the mount namespace their node's containerd runs in (`clusterbox node-ns`), which starts as a
// copy of this machine's: without more, a DaemonSet's installer (gcp-dev's nccl-tcpxo-installer mounts /var/lib
// and /home/kubernetes/bin) would read and write this machine's directories, and containerd creates a missing
// one on this machine's disk (containerd/containerd@v1.6.20 pkg/cri/opts/spec_linux.go:159-165 WithMounts: MkdirAll of
// a missing source). So each node's mount namespace gets an empty tmpfs over every hostPath directory the stack's
// objects name, before containerd starts: the pod finds an empty directory of its node (as on a fresh machine
// without the files), what it writes goes away with the namespace. A path that does not exist is made inside a
// tmpfs over its deepest existing ancestor. Left alone (recorded, with why): the kernel's /dev, /proc and /sys,
// the node's own /var/lib/kubelet, anything that is not a directory, and any path whose tmpfs would hide what the
// node itself runs from (its folder, the box's binary, the CNI plugins, system directories such as /usr or /run).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// HostPaths: every hostPath volume path the stack's objects name (any pod template), sorted.
func HostPaths(objects []Object) []string {
	seen := map[string]bool{}
	eachMap(objects, func(m map[string]any) {
		if hp, ok := m["hostPath"].(map[string]any); ok {
			if p, ok := hp["path"].(string); ok && p != "" {
				seen[p] = true
			}
		}
	})
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// nodeHostPaths: the stack's hostPath paths, set by main before the real nodes start (written to each node's
// folder as hostpaths.json for `clusterbox node-ns`)
var nodeHostPaths []string

// HostPathShadow is what a node's mount namespace did with one hostPath.
type HostPathShadow struct {
	Path   string `json:"path"`             // as the objects name it
	Tmpfs  string `json:"tmpfs,omitempty"`  // where the empty tmpfs is mounted (the path, or its deepest existing ancestor)
	Kept   string `json:"kept,omitempty"`   // why the machine's own is left (no tmpfs)
	Failed string `json:"failed,omitempty"` // the mount failed
}

// never hidden behind a tmpfs: the node runs from them (its binaries, libraries, state, configuration)
var systemDirs = []string{"/", "/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/root", "/run", "/sbin",
	"/tmp", "/usr", "/var", "/var/run", "/var/tmp", "/var/lib/kubelet"}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// planShadows decides, for each hostPath, where its tmpfs goes. needed: paths the node runs from (no tmpfs may
// cover them); stat: os.Stat for the real machine (a test's fake). Pure apart from stat.
func planShadows(paths, needed []string, stat func(string) (os.FileInfo, error)) []HostPathShadow {
	var out []HostPathShadow
	for _, raw := range paths {
		s := HostPathShadow{Path: raw}
		p := filepath.Clean(raw)
		if !filepath.IsAbs(p) {
			s.Kept = "not an absolute path"
			out = append(out, s)
			continue
		}
		if under(p, "/dev") || under(p, "/proc") || under(p, "/sys") {
			s.Kept = "the kernel's (devices, processes, sysfs): not files of this machine's disk"
			out = append(out, s)
			continue
		}
		if under(p, "/var/lib/kubelet") {
			s.Kept = "the node's own kubelet folder (its device-plugins folder is the node's already)"
			out = append(out, s)
			continue
		}
		at := p
		for {
			fi, err := stat(at)
			if err == nil {
				if !fi.IsDir() {
					s.Kept = fmt.Sprintf("%s is not a directory", at)
				}
				break
			}
			if at == "/" {
				s.Kept = "/ cannot be read"
				break
			}
			at = filepath.Dir(at)
		}
		if s.Kept != "" {
			out = append(out, s)
			continue
		}
		for _, d := range systemDirs {
			if at == d {
				s.Kept = fmt.Sprintf("a tmpfs over %s would hide what the node runs from", at)
				break
			}
		}
		for _, n := range needed {
			if s.Kept == "" && under(n, at) {
				s.Kept = fmt.Sprintf("a tmpfs over %s would hide %s, which the node runs from", at, n)
			}
		}
		if s.Kept == "" {
			s.Tmpfs = at
		}
		out = append(out, s)
	}
	return out
}

// shadowHostPaths runs in `clusterbox node-ns` (its own mount namespace, / already private): reads
// dir/hostpaths.json, mounts the tmpfs of each, makes the missing paths inside them, writes
// dir/hostpaths-done.json (read into the node's observation).
func shadowHostPaths(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "hostpaths.json"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var paths []string
	if err := json.Unmarshal(data, &paths); err != nil {
		return err
	}
	needed := []string{dir, cniBinDir}
	if exe, err := os.Executable(); err == nil {
		needed = append(needed, exe)
	}
	plan := planShadows(paths, needed, os.Stat)
	mounted := map[string]bool{}
	for i, s := range plan {
		if s.Tmpfs == "" {
			continue
		}
		inside := false // below a tmpfs mounted for an earlier path (sorted: /var/lib before /var/lib/x)
		for m := range mounted {
			inside = inside || under(s.Tmpfs, m)
		}
		if inside {
			plan[i].Tmpfs = ""
			for m := range mounted {
				if under(s.Tmpfs, m) {
					plan[i].Tmpfs = m
				}
			}
		} else {
			if err := syscall.Mount("box-hostpath", s.Tmpfs, "tmpfs", 0, "size=256m,mode=0755"); err != nil {
				plan[i].Failed = err.Error()
				continue
			}
			mounted[s.Tmpfs] = true
		}
	}
	// the paths inside their tmpfs (after every mount: a later tmpfs over an ancestor hides an earlier one's)
	for i, s := range plan {
		if s.Tmpfs != "" && s.Failed == "" {
			if err := os.MkdirAll(filepath.Clean(s.Path), 0o755); err != nil {
				plan[i].Failed = err.Error()
			}
		}
	}
	done, err := json.Marshal(plan)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "hostpaths-done.json"), done, 0o644)
}
