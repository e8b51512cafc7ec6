package main

import (
	"errors"
	"net"
	"testing"
)

// Ports come from below the kernel's ephemeral range and are never handed out twice in one process.
func TestFreePortBelowEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if low > 12000 && (p < 10000 || p >= low) {
			t.Fatalf("port %d outside [10000, %d)", p, low)
		}
	}
}

func TestBindFailure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = net.Listen("tcp", l.Addr().String())
	if !bindFailure(err) {
		t.Fatalf("a port already taken is not seen as a bind failure: %v", err)
	}
	if bindFailure(errors.New("kube-apiserver options: bad flag")) || bindFailure(nil) {
		t.Fatal("other errors are not bind failures")
	}
}

// The HyperNode repair keeps, for a member claimed twice, the parent whose name sorts first.
func TestDuplicateParents(t *testing.T) {
	hn := func(name string, members ...string) map[string]any {
		var ms []any
		for _, m := range members {
			ms = append(ms, map[string]any{"type": "HyperNode", "selector": map[string]any{
				"exactMatch": map[string]any{"name": m}}})
		}
		return map[string]any{"metadata": map[string]any{"name": name}, "spec": map[string]any{"members": ms}}
	}
	items := []map[string]any{hn("t2-b", "t1-x"), hn("t2-a", "t1-x"), hn("t1-x"), hn("t2-c", "t1-y")}
	if got := duplicateParents(items); len(got) != 1 || got[0] != "t2-b" {
		t.Fatalf("duplicateParents = %v, want [t2-b]", got)
	}
	if got := duplicateParents([]map[string]any{hn("t2-a", "t1-x"), hn("t2-c", "t1-y")}); len(got) != 0 {
		t.Fatalf("a consistent tree needs no repair, got %v", got)
	}
}
