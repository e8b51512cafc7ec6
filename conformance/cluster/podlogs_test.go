package main

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
