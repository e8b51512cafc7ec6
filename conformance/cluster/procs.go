package main

// The processes of a real node's containers, so that none outlives the box.
//
// containerd's runc shim (io.containerd.runc.v2) makes itself the child subreaper of what it starts
// (containerd/containerd@v1.6.20 runtime/v2/runc/v2/service.go New: reaper.SetSubreaper(1)): runc's init of each
// container, and anything a container's process forks or daemonizes (`ray start`, sshd's sessions, mpirun's
// orted), stay below the shim or below the container's own pid 1. The descendants of a node's shims are therefore
// every process of its pods. A process is named by its pid and its start time (field 22 of /proc/<pid>/stat), so
// a pid the kernel hands out again is not taken for the one that ended.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procID is one process: its pid and its start time in clock ticks after boot.
type procID struct {
	Pid   int
	Start uint64
}

type procInfo struct {
	ppid  int
	start uint64
	cmd   string // the command line, NULs as spaces
}

// procTable reads every process of /proc: its parent, start time and command line.
func procTable() map[int]procInfo {
	out := map[int]procInfo{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		ppid, start, ok := procStat(pid)
		if !ok {
			continue
		}
		cmd, _ := os.ReadFile(d + "/cmdline")
		out[pid] = procInfo{ppid: ppid, start: start, cmd: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))}
	}
	return out
}

// procStat: the parent pid (field 4) and start time (field 22) of /proc/<pid>/stat; the command name (field 2)
// is in parentheses and may hold spaces, so the fields are counted after its closing parenthesis.
func procStat(pid int) (int, uint64, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return ppid, start, true
}

// alive: the process still runs (same pid, same start time; a zombie has ended and counts as gone).
func (p procID) alive() bool {
	_, start, ok := procStat(p.Pid)
	if !ok || start != p.Start {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid))
	if err != nil {
		return false
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 && s[i+2] == 'Z' {
		return false
	}
	return true
}

// shimsOf: the containerd shims started for the node whose folder is dir (their command line names the node's
// containerd socket, which lies in dir).
func shimsOf(tab map[int]procInfo, dir string) []int {
	var out []int
	for pid, p := range tab {
		if strings.Contains(p.cmd, "containerd-shim") && strings.Contains(p.cmd, dir) {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

// descendants: every process below the given ones (not the roots themselves), sorted by pid.
func descendants(tab map[int]procInfo, roots []int) []procID {
	children := map[int][]int{}
	for pid, p := range tab {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	var out []procID
	seen := map[int]bool{}
	queue := append([]int{}, roots...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if seen[c] {
				continue
			}
			seen[c] = true
			out = append(out, procID{Pid: c, Start: tab[c].start})
			queue = append(queue, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return out
}

// containerProcs: the processes of the containers of the node whose folder is dir (the descendants of its shims).
func containerProcs(dir string) []procID {
	tab := procTable()
	return descendants(tab, shimsOf(tab, dir))
}

// killProcs sends SIGKILL to every process of ps that still runs.
func killProcs(ps []procID) {
	for _, p := range ps {
		if p.alive() {
			_ = syscall.Kill(p.Pid, syscall.SIGKILL)
		}
	}
}

// waitGone waits (at most limit) until no process of ps runs; it returns those that still do.
func waitGone(ps []procID, limit time.Duration) []procID {
	deadline := time.Now().Add(limit)
	for {
		var left []procID
		for _, p := range ps {
			if p.alive() {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// describeProcs: "pid 123 (sleep 300)" for each process, for an error of the box.
func describeProcs(ps []procID) []string {
	var out []string
	for _, p := range ps {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid))
		out = append(out, fmt.Sprintf("pid %d (%s)", p.Pid, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))))
	}
	return out
}

// inContainers: the processes (other than this one) in the cgroup of one of the given containers: containerd's
// CRI puts each container's processes in a cgroup named by the container's id (/k8s.io/<id> in every hierarchy
// here, /proc/<pid>/cgroup). A second look, after the shims are gone, for a process of a container that the
// walk from the shims could not see. (The root directory does not tell: /proc/<pid>/root of a container's
// process reads "/" from outside its mount namespace.)
func inContainers(ids map[string]bool) []procID {
	var out []procID
	if len(ids) == 0 {
		return out
	}
	self := os.Getpid()
	for pid, p := range procTable() {
		if pid == self {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if i := strings.LastIndexByte(line, '/'); i >= 0 && ids[line[i+1:]] {
				out = append(out, procID{Pid: pid, Start: p.start})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return out
}

// sweepShims ends every process below the shims of the nodes whose folders are dirs, including one a shim starts
// while it is swept: the shims are stopped first (SIGSTOP: they fork nothing more), then what runs below them is
// killed, looked at again and killed again until nothing is left or limit has passed (a killed `runc create`'s
// `runc init` is reparented to its shim, the subreaper, and is found on the next look; a killed child of a
// stopped shim stays a zombie, which counts as gone). It returns every process it killed.
func sweepShims(dirs []string, limit time.Duration) []procID {
	tab := procTable()
	var shims []int
	for _, d := range dirs {
		shims = append(shims, shimsOf(tab, d)...)
	}
	for _, pid := range shims {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	var swept []procID
	deadline := time.Now().Add(limit)
	for {
		var live []procID
		for _, p := range descendants(procTable(), shims) {
			if p.alive() {
				live = append(live, p)
			}
		}
		if len(live) == 0 || time.Now().After(deadline) {
			return swept
		}
		for _, p := range live {
			if !containsProc(swept, p) {
				swept = append(swept, p)
			}
		}
		killProcs(live)
		time.Sleep(50 * time.Millisecond)
	}
}
