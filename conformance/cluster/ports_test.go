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
