// Command coredns is CoreDNS (github.com/coredns/coredns, the version of go.mod) with only the plugins the
// cluster box's Corefile uses compiled in: upstream's main (coredns.go) imports core/plugin, which links every
// plugin of plugin.cfg (cloud DNS backends, etcd, Prometheus...); the box needs kubernetes, errors, log, health,
// ready, cache, loop-free local answers. Fewer packages keep the cold compile small (README.md here).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// the plugins of the box's Corefile (conformance/cluster/coredns.go), each registering its directive
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives: the order in which the plugins of a server block run, a sub-sequence of upstream's
// core/dnsserver/zdirectives.go (generated from plugin.cfg) holding only the plugins linked here.
var directives = []string{"ready", "health", "errors", "log", "cache", "kubernetes"}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
