package main

// The real nodes' folders (each node's containerd content store and unpacked snapshots, its kubelet's root dir,
// the pods' logs) are on one tmpfs of the run (StartRealNodes): unmounted at the end instead of a minute of file
// deletion on disk. Its size is only a bound (a tmpfs takes memory as it is written), but a bound that is too low
// fails the nodes: existing-dev (8 real nodes, 2026-11-28) filled the fixed 8 GiB, its Indexed Job's preflight
// image pulls failed "failed to extract layer ...: no space left on device" (kubelet log) and the box waited out
// its gang bound and then its timeout. What a node writes, measured on these stand-ins: the rootfs unpacked (263 MB,
// every node: the pause image too), the Ray layer (218 MB) for the images that run Ray, the PyTorch layer (832 MB)
// for those that launch torchrun, pulled from the box's registry and so held twice while it is unpacked (the blob
// in the content store until containerd drops it, discard_unpacked_layers): about 2.1 GB at most per node, plus
// the blobs of the imported archive (hard-linked between the nodes: once) and the logs.

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const gib = uint64(1) << 30

// NodesTmpfsView: the nodes' tmpfs, as sized and as used (observed.json nodesTmpfs; realnode_check.py makes a
// finding of one that filled up).
type NodesTmpfsView struct {
	Path              string `json:"path"`
	SizeBytes         uint64 `json:"sizeBytes"`
	Why               string `json:"why"`
	MemAvailableBytes uint64 `json:"memAvailableBytes"` // this machine's MemAvailable when the box mounted it
	PeakUsedBytes     uint64 `json:"peakUsedBytes"`     // the most seen in use (read every 2 s)
	EndUsedBytes      uint64 `json:"endUsedBytes"`      // in use when the nodes stopped
}

// nodesTmpfsGiB: --nodes-tmpfs-gib, the size of the nodes' tmpfs (0: nodesTmpfsSize decides).
var nodesTmpfsGiB int

// nodesTmpfsSize: 1 GiB + 2 GiB per real node (above), at most this machine's MemAvailable less 4 GiB for the
// box's processes and the pods' own memory, and never less than 8 GiB (the size before it was computed, enough for
// the stacks of 2 to 4 real nodes); override (GiB) wins when given.
func nodesTmpfsSize(nodes int, memAvailable uint64, override int) (uint64, string) {
	if override > 0 {
		return uint64(override) * gib, fmt.Sprintf("--nodes-tmpfs-gib=%d", override)
	}
	want := gib + 2*gib*uint64(nodes)
	floor := 8 * gib
	why := fmt.Sprintf("1 GiB + 2 GiB x %d real nodes", nodes)
	if memAvailable > 0 && want+4*gib > memAvailable {
		capped := uint64(0)
		if memAvailable > 4*gib {
			capped = memAvailable - 4*gib
		}
		want = capped
		why += fmt.Sprintf(", capped at MemAvailable %.1f GiB - 4 GiB", float64(memAvailable)/float64(gib))
	}
	if want < floor {
		want = floor
		why += ", raised to the 8 GiB floor"
	}
	want = (want + (1<<20 - 1)) &^ (1<<20 - 1) // whole MiB, as the mount option takes it
	return want, why
}

// memAvailable: /proc/meminfo's MemAvailable in bytes (0 when it cannot be read).
func memAvailable() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// fsUsed: the bytes in use on the filesystem at path.
func fsUsed(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return (st.Blocks - st.Bfree) * uint64(st.Bsize), nil
}

// tmpfsWatch reads the use of the nodes' tmpfs every 2 s and keeps the peak, until stop.
type tmpfsWatch struct {
	view NodesTmpfsView
	read func(path string) (uint64, error) // fsUsed
	mu   sync.Mutex
	quit chan struct{}
	done chan struct{}
}

func watchTmpfs(view NodesTmpfsView) *tmpfsWatch {
	return startWatch(&tmpfsWatch{view: view, read: fsUsed, quit: make(chan struct{}), done: make(chan struct{})})
}

func startWatch(w *tmpfsWatch) *tmpfsWatch {
	go func() {
		defer close(w.done)
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			w.sample()
			select {
			case <-w.quit:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *tmpfsWatch) sample() uint64 {
	used, err := w.read(w.view.Path)
	if err != nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if used > w.view.PeakUsedBytes {
		w.view.PeakUsedBytes = used
	}
	return used
}

// stop ends the watch (before the tmpfs is unmounted) and returns the view with the use at the end.
func (w *tmpfsWatch) stop() NodesTmpfsView {
	close(w.quit)
	<-w.done
	end := w.sample()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.view.EndUsedBytes = end
	return w.view
}

var nodesTmpfs *tmpfsWatch // the watch of the nodes' tmpfs, ended by StopRealNodes
var nodesTmpfsView *NodesTmpfsView
