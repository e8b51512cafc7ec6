package main

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The copies of the kubelet's pod logs (podlogs.go): what a file gains is appended, a file started anew is copied
// from its start, what the container wrote before the kubelet removed its log (a deleted pod's last lines) is in
// the copy, a new file under a kept name moves the older aside, and an earlier run's copies go.
func TestLogMirrorCopiesWhatTheLogsGain(t *testing.T) {
	node := t.TempDir()
	src, keep := filepath.Join(node, "pod-logs"), filepath.Join(node, "kept-logs")
	out := filepath.Join(t.TempDir(), "stack", "pod-logs")
	f := filepath.Join(src, "ns_master-0_uid1", "main", "0.log")
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(out, "ns_old_uid0", "main"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(s string, flag int) {
		_ = os.MkdirAll(filepath.Dir(f), 0o755)
		w, err := os.OpenFile(f, os.O_CREATE|os.O_WRONLY|flag, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.WriteString(s)
		w.Close()
	}
	write("a\nb\n", os.O_TRUNC)
	if err := startLogMirror(out, keep, []string{src}); err != nil {
		t.Fatal(err)
	}
	defer stopLogMirror()
	if _, err := os.Stat(filepath.Join(out, "ns_old_uid0")); !os.IsNotExist(err) {
		t.Fatalf("an earlier run's copy is still there: %v", err)
	}
	dst := podLogCopy(f)
	if want := filepath.Join(out, "ns_master-0_uid1", "main", "0.log"); dst != want {
		t.Fatalf("copy of %s at %s, want %s", f, dst, want)
	}
	read := func() string {
		b, _ := os.ReadFile(dst)
		return string(b)
	}
	syncPodLogs()
	if got := read(); got != "a\nb\n" {
		t.Fatalf("first copy %q", got)
	}
	write("c\n", os.O_APPEND)
	syncPodLogs()
	syncPodLogs()
	if got := read(); got != "a\nb\nc\n" {
		t.Fatalf("after an append %q, want the three lines once", got)
	}
	write("X\n", os.O_TRUNC) // a file started anew
	syncPodLogs()
	if got := read(); got != "X\n" {
		t.Fatalf("a file started anew copied as %q", got)
	}
	// the container writes its last lines, the kubelet removes the log, before the next copy
	w, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	_, _ = w.WriteString("Y\n") // written to the file after its unlink too, as by a process still running
	w.Close()
	syncPodLogs()
	if got := read(); got != "X\nY\n" {
		t.Fatalf("the copy of a removed log is %q, want its last lines too", got)
	}
	// a new file under the name (a restart's log written anew): the older copy moves aside, the new is copied
	write("Z\n", os.O_TRUNC)
	syncPodLogs()
	if got := read(); got != "Z\n" {
		t.Fatalf("the new file copied as %q", got)
	}
	aside, _ := filepath.Glob(dst + ".*")
	if len(aside) != 1 {
		t.Fatalf("the older copy moved aside: %v", aside)
	}
	if b, _ := os.ReadFile(aside[0]); string(b) != "X\nY\n" {
		t.Fatalf("the older copy %s holds %q", aside[0], b)
	}
}

// The relay of the `kubernetes` Service's endpoint (apiservice.go) carries a connection both ways, and a half
// close of the client reaches the server.
func TestRelayCarriesBothWays(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		c, err := srv.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		sc := bufio.NewScanner(c)
		var got []string
		for sc.Scan() { // until the client's half close
			got = append(got, sc.Text())
		}
		_, _ = c.Write([]byte("echo " + strings.Join(got, ",") + "\n"))
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go relay(ln, srv.Addr().String())
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("one\ntwo\n"))
	_ = c.(*net.TCPConn).CloseWrite()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "echo one,two\n" {
		t.Fatalf("through the relay: %q, %v", line, err)
	}
}

// The pods a phase saw on real nodes and that are gone at its snapshot (podlogs.go gonePods): as last seen before
// their deletion began; nothing when the box is not tracking (outside a phase's settle and gang wait).
func TestGonePodsAsLastSeenBeforeTheirDeletion(t *testing.T) {
	realNodeNames["gpu-9"] = true
	defer delete(realNodeNames, "gpu-9")
	pod := func(name, uid, phase string, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
			Spec: corev1.PodSpec{NodeName: "gpu-9"}, Status: corev1.PodStatus{Phase: corev1.PodPhase(phase)}}
		if deleting {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		return p
	}
	notePods([]corev1.Pod{pod("w0", "u0", "Running", false)})
	if g := gonePods(nil); g != nil {
		t.Fatalf("not tracking, yet gone pods: %v", g)
	}
	trackPods(true)
	defer trackPods(false)
	master, w0, fake := pod("master", "u1", "Running", false), pod("w0", "u0", "Running", false), pod("f", "u2", "Running", false)
	fake.Spec.NodeName = "cpu-0" // a fake node's pod is not noted
	notePods([]corev1.Pod{master, w0, fake})
	notePods([]corev1.Pod{master, pod("w0", "u0", "Failed", true)}) // being deleted: its earlier view stays
	g := gonePods([]corev1.Pod{master})
	if len(g) != 1 || g[0].Name != "w0" || g[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("gone pods %v, want w0 as last seen Running", g)
	}
	if g := gonePods([]corev1.Pod{master, w0}); len(g) != 0 {
		t.Fatalf("gone pods %v while all are there", g)
	}
}
