package main

// The whole log of every container the real kubelets ran, kept under the stack's build folder
// (build/<stack>/pod-logs/<ns>_<pod>_<uid>/<container>/<restart>.log, the kubelet's own layout and CRI format).
// The kubelet writes them on the nodes' tmpfs, which goes with the box, and removes a pod's logs once the pod is
// deleted (the box deletes each batch phase's workload after its snapshot; a Volcano Job's policy deletes its
// pods when a container fails): a container's last lines, written while its pod was being deleted (the NCCL
// check's verdict after its workers went), would be lost. Every 2 s the box hard-links each new log file into a
// folder of its own on the same tmpfs (the link keeps the file, and all the kubelet still writes to it, after
// the kubelet unlinks it) and copies what each kept file gained to the build folder; again at every phase's
// snapshot and once more before the nodes stop. observed.json names each pod's copies (PodView.LogFiles); the
// findings of a failing container and of a gang that did not form name them (realnode_check.py, gang_check.py).

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// podLogsMax: the most of one log file the box keeps (a container that writes more is cut there, and says so)
const podLogsMax = 32 << 20

type logMirror struct {
	mu   sync.Mutex
	out  string           // build/<stack>/pod-logs
	keep string           // the hard links, on the kubelets' filesystem
	srcs []string         // each real node's pod-logs folder
	done map[string]int64 // bytes copied per kept file
	stop chan struct{}
}

var podLogMirror *logMirror

// startLogMirror empties out (an earlier run's files must not be read as this run's) and keeps the real nodes'
// pod logs (srcs: their pod-logs folders) there, through hard links in keep (a folder on the same filesystem as
// srcs), every 2 s until stopLogMirror.
func startLogMirror(out, keep string, srcs []string) error {
	for _, d := range []string{out, keep} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	m := &logMirror{out: out, keep: keep, srcs: srcs, done: map[string]int64{}, stop: make(chan struct{})}
	podLogMirror = m
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.sync()
			}
		}
	}()
	return nil
}

// stopLogMirror copies what is left and stops the copying (before the nodes' tmpfs goes).
func stopLogMirror() {
	m := podLogMirror
	if m == nil {
		return
	}
	close(m.stop)
	m.sync()
	podLogMirror = nil
}

// syncPodLogs copies what the logs gained since the last copy (a phase's snapshot reads the copies' names).
func syncPodLogs() {
	if m := podLogMirror; m != nil {
		m.sync()
	}
}

// podLogCopy: where the copy of a log file of the kubelet's (<pod-logs>/<pod dir>/<container>/<n>.log) is kept,
// "" when no copy is made.
func podLogCopy(src string) string {
	m := podLogMirror
	if m == nil {
		return ""
	}
	rel := filepath.Join(filepath.Base(filepath.Dir(filepath.Dir(src))), filepath.Base(filepath.Dir(src)), filepath.Base(src))
	return filepath.Join(m.out, rel)
}

func (m *logMirror) sync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, src := range m.srcs {
		files, _ := filepath.Glob(filepath.Join(src, "*", "*", "*.log"))
		for _, f := range files {
			m.link(f, filepath.Join(m.keep, strings.TrimPrefix(f, src+string(os.PathSeparator))))
		}
	}
	kept, _ := filepath.Glob(filepath.Join(m.keep, "*", "*", "*.log*"))
	for _, k := range kept {
		m.copyNew(k, filepath.Join(m.out, strings.TrimPrefix(k, m.keep+string(os.PathSeparator))))
	}
}

// link keeps the kubelet's file src as keep (a hard link); a file that took the name of one kept before (a new
// file under the same name) moves the older link aside (<n>.log.<inode>).
func (m *logMirror) link(src, keep string) {
	st, err := os.Stat(src)
	if err != nil {
		return
	}
	if kst, err := os.Stat(keep); err == nil {
		if os.SameFile(st, kst) {
			return
		}
		ino := uint64(0)
		if sys, ok := kst.Sys().(*syscall.Stat_t); ok {
			ino = sys.Ino
		}
		aside := fmt.Sprintf("%s.%d", keep, ino)
		if os.Rename(keep, aside) == nil {
			if d, ok := m.done[keep]; ok {
				m.done[aside] = d
				delete(m.done, keep)
			}
			_ = os.Rename(filepath.Join(m.out, m.rel(keep)), filepath.Join(m.out, m.rel(aside)))
		}
	}
	if err := os.MkdirAll(filepath.Dir(keep), 0o755); err != nil {
		return
	}
	_ = os.Link(src, keep)
}

func (m *logMirror) rel(keep string) string {
	return strings.TrimPrefix(keep, m.keep+string(os.PathSeparator))
}

// copyNew appends to dst what src (a kept link) holds past the bytes already copied (the kubelet only appends to a
// container's log file; a file shorter than what was copied was started anew: copied again from its start).
func (m *logMirror) copyNew(src, dst string) {
	st, err := os.Stat(src)
	if err != nil {
		return
	}
	done, seen := m.done[src]
	if st.Size() < done {
		done, seen = 0, false
	}
	if seen && st.Size() == done {
		return
	}
	if done >= podLogsMax {
		return
	}
	in, err := os.Open(src)
	if err != nil {
		return
	}
	defer in.Close()
	if _, err := in.Seek(done, io.SeekStart); err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if !seen {
		flags |= os.O_TRUNC
	}
	out, err := os.OpenFile(dst, flags, 0o644)
	if err != nil {
		return
	}
	defer out.Close()
	n, _ := io.Copy(out, io.LimitReader(in, podLogsMax-done))
	m.done[src] = done + n
	if done+n >= podLogsMax {
		_, _ = fmt.Fprintf(out, "\n[the box kept the first %d MiB of this log only]\n", podLogsMax>>20)
	}
}

// Pods their controller deleted during a phase. A Volcano Job whose master task completes is completed by its
// policy (TaskCompleted -> CompleteJob), and Volcano then deletes the pods still running (volcano.sh/volcano@v1.14.1
// pkg/controllers/job/state/completing.go:31 KillJob with PodRetainPhaseSoft, state/factory.go:46-49: only
// Succeeded and Failed pods are kept): volcano-llm-training's worker whose trainer was a second from exiting 0 when the
// master's ended was gone before the phase's snapshot, and the box counted 3 pods of plan's 4 although all 4 had
// joined the gang. While a phase settles and its gangs are waited for, the box notes every real-node pod it lists as
// last seen before its deletion began; the snapshot adds each that is gone by then (PodView.Gone), with the copies of
// its logs, so a gang is counted with every pod that ran in it.
type seenPods struct {
	on   bool
	pods map[string]corev1.Pod // by UID
}

var phaseSeen seenPods

// trackPods starts (on) or ends the noting of a phase's real-node pods.
func trackPods(on bool) {
	phaseSeen = seenPods{on: on, pods: map[string]corev1.Pod{}}
}

// notePods notes the real-node pods of a listing that are bound and not being deleted.
func notePods(items []corev1.Pod) {
	if !phaseSeen.on {
		return
	}
	for _, p := range items {
		if realNodeNames[p.Spec.NodeName] && p.DeletionTimestamp == nil {
			phaseSeen.pods[string(p.UID)] = p
		}
	}
}

// gonePods: the noted pods not in the listing now, as last seen.
func gonePods(items []corev1.Pod) []corev1.Pod {
	if !phaseSeen.on {
		return nil
	}
	now := map[string]bool{}
	for _, p := range items {
		now[string(p.UID)] = true
	}
	var out []corev1.Pod
	for uid, p := range phaseSeen.pods {
		if !now[uid] {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
}

// goneLogFiles: the copies of a gone pod's logs (the kubelet's own are removed with the pod), by container: the
// newest restart's file of each.
func goneLogFiles(p corev1.Pod) map[string]string {
	m := podLogMirror
	if m == nil {
		return nil
	}
	dir := filepath.Join(m.out, p.Namespace+"_"+p.Name+"_"+string(p.UID))
	conts, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, c := range conts {
		files, _ := filepath.Glob(filepath.Join(dir, c.Name(), "*.log"))
		if len(files) == 0 {
			continue
		}
		sort.Slice(files, func(i, j int) bool { return restartOf(files[i]) < restartOf(files[j]) })
		out[c.Name()] = files[len(files)-1]
	}
	return out
}
