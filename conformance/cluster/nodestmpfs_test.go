package main

import (
	"strings"
	"sync"
	"testing"
)

// existing-dev's 8 real nodes filled the fixed 8 GiB tmpfs (its PyTorch pulls failed "no space left on device"):
// the size grows with the nodes, within this machine's free memory, never below the old 8 GiB.
func TestNodesTmpfsSize(t *testing.T) {
	for _, c := range []struct {
		nodes    int
		avail    uint64
		override int
		want     uint64
		why      string
	}{
		{8, 24 * gib, 0, 17 * gib, "1 GiB + 2 GiB x 8 real nodes"},            // existing-dev, memory to spare
		{8, 16 * gib, 0, 12 * gib, "capped at MemAvailable 16.0 GiB - 4 GiB"}, // a loaded machine
		{2, 24 * gib, 0, 8 * gib, "raised to the 8 GiB floor"},                // oci-dev: as before
		{8, 6 * gib, 0, 8 * gib, "raised to the 8 GiB floor"},                 // little memory: no lower than before
		{6, 0, 0, 13 * gib, "1 GiB + 2 GiB x 6 real nodes"},                   // MemAvailable unread
		{8, 24 * gib, 10, 10 * gib, "--nodes-tmpfs-gib=10"},                   // the flag
	} {
		got, why := nodesTmpfsSize(c.nodes, c.avail, c.override)
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("nodesTmpfsSize(%d, %d GiB, %d) = %.2f GiB (%s); want %.2f GiB (%s)", c.nodes, c.avail/gib, c.override,
				float64(got)/float64(gib), why, float64(c.want)/float64(gib), c.why)
		}
		if got%(1<<20) != 0 {
			t.Errorf("nodesTmpfsSize(%d, ...) = %d bytes: not whole MiB", c.nodes, got)
		}
	}
	if memAvailable() == 0 {
		t.Errorf("MemAvailable not read from /proc/meminfo")
	}
}

// The watch keeps the most seen in use and the use at the end.
func TestTmpfsWatchKeepsThePeak(t *testing.T) {
	uses := []uint64{1 * gib, 5 * gib, 3 * gib}
	var mu sync.Mutex
	n := 0
	read := func(path string) (uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		u := uses[min(n, len(uses)-1)]
		n++
		return u, nil
	}
	w := startWatch(&tmpfsWatch{view: NodesTmpfsView{Path: "/x", SizeBytes: 8 * gib}, read: read,
		quit: make(chan struct{}), done: make(chan struct{})})
	w.sample()
	w.sample()
	v := w.stop()
	if v.PeakUsedBytes != 5*gib || v.EndUsedBytes != 3*gib {
		t.Errorf("peak %d, end %d; want 5 GiB and 3 GiB", v.PeakUsedBytes/gib, v.EndUsedBytes/gib)
	}
	if used, err := fsUsed(t.TempDir()); err != nil || used == 0 {
		t.Errorf("fsUsed of a folder: %d, %v", used, err)
	}
}
