// CoreDNS for tests/env, with a reduced plugin set.
//
// Upstream's main package imports github.com/coredns/coredns/core/plugin,
// which links every plugin (cloud DNS providers, etcd, dnstap, ...). This one
// imports coremain plus only the plugins the test cluster's Corefile uses:
// the cluster zone (kubernetes), the kubeadm default Corefile's plugins
// (errors, health, ready, prometheus, forward, cache, loop, reload,
// loadbalance), log, template (answers for names outside the cluster, which
// cannot be forwarded anywhere from the private network namespace) and bind.
//
// The execution order of plugins does not come from this list: it is the
// Directives slice compiled into core/dnsserver (upstream's plugin.cfg order);
// a directive whose plugin is not linked is simply unavailable. `coredns
// -plugins` lists what is linked.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() {
	coremain.Run()
}
