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
	Path  string `json:"path"`            // as the objects name it
	Tmpfs string `json:"tmpfs,omitempty"` // where the empty tmpfs is mounted (the path, or its deepest existing ancestor)
	// a missing path below a system directory: an overlay of that directory (the machine's files as its lower
	// layer, a tmpfs of the node as its upper), where the path is made; the directory as the mount sees it
	Overlay string `json:"overlay,omitempty"`
	Kept    string `json:"kept,omitempty"`   // why the machine's own is left (no tmpfs)
	Failed  string `json:"failed,omitempty"` // the mount failed
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
		if s.Kept != "" && at != p && at != "/" && !under(at, "/var/lib/kubelet") {
			// missing, below a system directory: a real node has it (azure-dev's peermem reloader mounts
			// /lib/modules, type Directory, which this machine lacks); an overlay keeps the directory's files
			// visible and makes the path in the node's upper layer, not on this machine's disk
			s.Kept, s.Overlay = "", at
			out = append(out, s)
			continue
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
	// the overlays first (a tmpfs below one, mounted after, stays on top of it)
	overlaid := map[string]string{} // the directory as named -> "" when mounted, else why not
	for i, s := range plan {
		if s.Overlay == "" {
			continue
		}
		why, done := overlaid[s.Overlay]
		if !done {
			why = overlayDir(dir, s.Overlay, len(overlaid))
			overlaid[s.Overlay] = why
		}
		if why != "" {
			plan[i].Overlay, plan[i].Kept = "", why
		}
	}
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
		if (s.Tmpfs != "" || s.Overlay != "") && s.Failed == "" {
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

// overlayDir mounts, in the node's mount namespace, an overlay over the system directory at (its real path: /lib
// is /usr/lib here): the directory's own files as the lower layer, a folder of the node's (on the nodes' tmpfs) as
// the upper, so what is made or written there is the node's and this machine's disk is not changed. It returns
// why not, "" when mounted: an overlay does not show the mounts below its lower directory, so a directory with a
// mount below it is left as it is. (Linux Documentation/filesystems/overlayfs.rst: lowerdir, upperdir, workdir;
// the upper and work directories on the same filesystem.)
func overlayDir(dir, at string, n int) string {
	real, err := filepath.EvalSymlinks(at)
	if err != nil {
		return fmt.Sprintf("%s: %v", at, err)
	}
	if sub := mountsBelow(real); len(sub) > 0 {
		return fmt.Sprintf("an overlay over %s would hide the mounts below it (%s)", real, strings.Join(sub, ", "))
	}
	top := filepath.Join(dir, "hostpath-overlay", fmt.Sprint(n))
	upper, work := filepath.Join(top, "upper"), filepath.Join(top, "work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err.Error()
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", real, upper, work)
	if err := syscall.Mount("box-hostpath", real, "overlay", 0, opts); err != nil {
		return fmt.Sprintf("overlay over %s: %v", real, err)
	}
	return ""
}

// mountsBelow: the mount points of this mount namespace strictly below dir (/proc/self/mountinfo, field 5).
func mountsBelow(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return []string{"/proc/self/mountinfo: " + err.Error()}
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] != dir && under(f[4], dir) {
			out = append(out, f[4])
		}
	}
	sort.Strings(out)
	return out
}
