package main

// The box's own network namespace (issue 42, "nothing leaves the box"): with --netns, clusterbox starts itself
// again in a new network namespace (clone(CLONE_NEWNET), nothing else unshared: the mount namespace stays the
// host's, so the cgroup v1 mounts the kubelet needs stay visible; `ip netns exec` would remount /sys and hide
// them), brings its loopback up and runs there. A new network namespace holds only a loopback interface and no
// route; every child (Kyverno, LWS, Volcano, the kubelets, containerd, the pods' namespaces made by containerd)
// inherits it, so no component of the box can send a packet to an address outside it.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

const inNetnsEnv = "MULTINODE_BOX_IN_NETNS"

// reexecInNetns runs this command again in a new network namespace and returns its exit code.
func reexecInNetns() int {
	var args []string
	for _, a := range os.Args[1:] {
		if a != "--netns" && a != "-netns" && a != "--netns=true" && a != "-netns=true" {
			args = append(args, a)
		}
	}
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), inNetnsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "box: cannot start in a new network namespace (needs root / CAP_SYS_ADMIN): %v\n", err)
		return 2
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "box:", err)
		return 2
	}
	return 0
}

// NetnsView is what the box's network namespace holds, read with iproute2 from inside it.
type NetnsView struct {
	Inode        string     `json:"inode"` // /proc/self/ns/net
	HostInode    string     `json:"hostInode"`
	Links        []NetLink  `json:"links"`
	Routes       []NetRoute `json:"routes"`
	DefaultRoute bool       `json:"defaultRoute"`
	// Outside: every link or route that is not the loopback or one the box made (names in boxLinkPrefixes)
	Outside []string `json:"outside"`
}

type NetLink struct {
	Name  string `json:"ifname"`
	Kind  string `json:"kind"`
	State string `json:"operstate"`
}

type NetRoute struct {
	Dst   string `json:"dst"`
	Dev   string `json:"dev"`
	Table string `json:"table"`
}

// Interfaces the box creates in its namespace: the nodes' dummy interface, each real node's CNI bridge and the
// host ends of the pods' veth pairs (the CNI bridge plugin names them veth<random>).
var boxLinkPrefixes = []string{"lo", "boxnodes", "boxbr", "veth", "kube-ipvs0", "nodelocaldns"}

// ReadNetns describes the current network namespace. hostNS is the inode of the parent's namespace
// (/proc/<ppid>/ns/net), so that a test can see the two differ.
func ReadNetns() (NetnsView, error) {
	v := NetnsView{Outside: []string{}}
	v.Inode, _ = os.Readlink("/proc/self/ns/net")
	v.HostInode, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/net", os.Getppid()))
	out, err := exec.Command("ip", "-j", "-d", "link", "show").Output()
	if err != nil {
		return v, fmt.Errorf("ip link: %w", err)
	}
	var links []struct {
		Name     string `json:"ifname"`
		State    string `json:"operstate"`
		LinkType string `json:"link_type"`
		Info     struct {
			Kind string `json:"info_kind"`
		} `json:"linkinfo"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return v, fmt.Errorf("ip -j link: %w", err)
	}
	for _, l := range links {
		kind := l.Info.Kind
		if kind == "" {
			kind = l.LinkType
		}
		v.Links = append(v.Links, NetLink{Name: l.Name, Kind: kind, State: l.State})
		ours := false
		for _, p := range boxLinkPrefixes {
			if l.Name == p || (p != "lo" && strings.HasPrefix(l.Name, p)) {
				ours = true
			}
		}
		if !ours {
			v.Outside = append(v.Outside, "link "+l.Name+" ("+kind+")")
		}
	}
	for _, fam := range []string{"-4", "-6"} {
		out, err = exec.Command("ip", "-j", fam, "route", "show", "table", "all").Output()
		if err != nil {
			return v, fmt.Errorf("ip route: %w", err)
		}
		var routes []struct {
			Dst   string `json:"dst"`
			Dev   string `json:"dev"`
			Table string `json:"table"`
		}
		if len(strings.TrimSpace(string(out))) > 0 {
			if err := json.Unmarshal(out, &routes); err != nil {
				return v, fmt.Errorf("ip -j route: %w", err)
			}
		}
		for _, r := range routes {
			v.Routes = append(v.Routes, NetRoute{Dst: r.Dst, Dev: r.Dev, Table: r.Table})
			if r.Dst == "default" || r.Dst == "0.0.0.0/0" || r.Dst == "::/0" {
				v.DefaultRoute = true
				v.Outside = append(v.Outside, "default route via "+r.Dev)
			}
		}
	}
	return v, nil
}

// setupNetns brings the loopback of the new namespace up and checks that nothing else is there.
func setupNetns() (NetnsView, error) {
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return NetnsView{}, fmt.Errorf("ip link set lo up: %v: %s", err, out)
	}
	v, err := ReadNetns()
	if err != nil {
		return v, err
	}
	if v.Inode == v.HostInode {
		return v, fmt.Errorf("the box is not in a network namespace of its own (%s)", v.Inode)
	}
	if len(v.Links) != 1 || v.Links[0].Name != "lo" || v.DefaultRoute {
		return v, fmt.Errorf("the new network namespace is not empty: links %v, outside %v", v.Links, v.Outside)
	}
	return v, nil
}
