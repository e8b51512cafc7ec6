package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeShim starts a process named like a containerd shim of the node folder dir (its command line names the
// node's socket), which starts two "container processes" below it, one of them in a session of its own (as a
// daemonized process would be): both are below the shim.
func fakeShim(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	c := exec.Command("/bin/sh", "-c", "sleep 300 & setsid sleep 301 & wait")
	c.Args[0] = "containerd-shim-runc-v2 -namespace k8s.io -address " + filepath.Join(dir, "containerd", "containerd.sock")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c
}

// waitProcs waits until the fake shim has n processes below it.
func waitProcs(t *testing.T, dir string, n int) []procID {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps := containerProcs(dir)
		if len(ps) == n {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes below the fake shim, want %d: %v", len(ps), n, describeProcs(ps))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestContainerProcsAreTheShimsDescendants(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	fakeShim(t, dir)
	fakeShim(t, other) // another node's shim: not this node's
	ps := waitProcs(t, dir, 2)
	for _, d := range describeProcs(ps) {
		if !strings.Contains(d, "sleep 30") {
			t.Errorf("not a container process of the fake node: %s", d)
		}
	}
	// the end-of-box check sees a process that still runs, and names it
	left := waitGone(ps, 200*time.Millisecond)
	if len(left) != 2 {
		t.Fatalf("waitGone: %d left, want the 2 that run", len(left))
	}
	killProcs(ps)
	if left := waitGone(ps, 5*time.Second); len(left) != 0 {
		t.Fatalf("still running after SIGKILL: %v", describeProcs(left))
	}
	// the other node's processes were left alone
	if n := len(containerProcs(other)); n != 2 {
		t.Fatalf("the other node has %d processes, want 2", n)
	}
}

func TestProcIDIsNotAReusedPid(t *testing.T) {
	dir := t.TempDir()
	fakeShim(t, dir)
	ps := waitProcs(t, dir, 2)
	p := ps[0]
	if !p.alive() {
		t.Fatalf("pid %d runs but is not alive()", p.Pid)
	}
	p.Start++ // the same pid with another start time: another process
	if p.alive() {
		t.Fatalf("pid %d with another start time taken for the same process", p.Pid)
	}
}

// StopRealNodes ends every process below a node's shims, not only the shims (the shims' children, reparented to
// init once the shim is gone, ran on after the box before).
func TestStopRealNodesLeavesNoProcessOfAPod(t *testing.T) {
	dir := t.TempDir()
	fakeShim(t, dir)
	ps := waitProcs(t, dir, 2)
	seen, leftovers := StopRealNodes([]*RealNode{{dir: dir}})
	if seen != 2 {
		t.Errorf("StopRealNodes saw %d processes of the fake node, want 2", seen)
	}
	if len(leftovers) != 0 {
		t.Fatalf("StopRealNodes reports leftovers: %v", leftovers)
	}
	if left := waitGone(ps, time.Second); len(left) != 0 {
		t.Fatalf("processes of the fake node still run after StopRealNodes: %v", describeProcs(left))
	}
}

// inContainers finds a process by the last element of its cgroup path (the container's id under containerd's
// CRI); here a child of the test, in the test's own cgroup.
func TestInContainersByCgroupName(t *testing.T) {
	c := exec.Command("sleep", "300")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if i := strings.LastIndexByte(line, '/'); i >= 0 && line[i+1:] != "" {
			name = line[i+1:]
			break
		}
	}
	if name == "" {
		t.Skip("the test runs in the root cgroup of every hierarchy: no name to look for")
	}
	found := false
	for _, p := range inContainers(map[string]bool{name: true}) {
		if p.Pid == c.Process.Pid {
			found = true
		}
	}
	if !found {
		t.Fatalf("pid %d in cgroup .../%s not found", c.Process.Pid, name)
	}
	for _, p := range inContainers(map[string]bool{"0123456789abcdef-no-such-container": true}) {
		t.Errorf("pid %d found for a container that does not exist", p.Pid)
	}
}

// A container being created when the nodes stop: its process appears below the shim only after StopRealNodes took
// its first look (the fake shim forks it a second later, as a shim's `runc create` forks `runc init`). It was
// left running, reparented to init, once the shim was killed; it must be ended with the rest and counted.
func TestStopRealNodesEndsAContainerBeingCreated(t *testing.T) {
	dir := t.TempDir()
	late := fmt.Sprintf("sleep 317.%d", os.Getpid()) // a command line no other process has
	c := exec.Command("/bin/sh", "-c", "sleep 300 & sleep 1; "+late+" & wait")
	c.Args[0] = "containerd-shim-runc-v2 -namespace k8s.io -address " + filepath.Join(dir, "containerd", "containerd.sock")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	lateProcs := func() []procID {
		var out []procID
		for pid, p := range procTable() {
			if p.cmd == late && (procID{pid, p.start}).alive() {
				out = append(out, procID{pid, p.start})
			}
		}
		return out
	}
	t.Cleanup(func() { killProcs(lateProcs()) })
	waitProcs(t, dir, 2) // sleep 300 and sleep 1: the late one is not there yet
	if ps := lateProcs(); len(ps) != 0 {
		t.Fatalf("the late process runs before StopRealNodes: %v", describeProcs(ps))
	}
	seen, leftovers := StopRealNodes([]*RealNode{{dir: dir}})
	if len(leftovers) != 0 {
		t.Errorf("StopRealNodes reports leftovers: %v", leftovers)
	}
	if ps := lateProcs(); len(ps) != 0 {
		t.Fatalf("the process the fake shim started during StopRealNodes still runs after it: %v", describeProcs(ps))
	}
	if seen != 3 {
		t.Errorf("StopRealNodes saw %d processes of the fake node, want 3 (sleep 300, sleep 1, the late one)", seen)
	}
}
