// Package testunbound starts Debian's unbound (package unbound), a validating resolver, for
// a test, on 127.0.0.1: it validates one signed zone, served by a server on loopback, from
// that zone's DS as its trust anchor.
package testunbound

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/miekg/dns"
)

// Bin is unbound's path.
const Bin = "/usr/sbin/unbound"

// Options says what the resolver validates.
type Options struct {
	// Zone is the signed zone, absolute ("signed.test.").
	Zone string
	// Anchor is its DS record, as the zone's parent would publish it.
	Anchor string
	// Server is the zone's DNS server (UDP), on loopback.
	Server netip.AddrPort
	// ClientSubnet: the resolver passes its clients' subnets (EDNS Client Subnet, /24 at
	// most) on to Server, through unbound's subnetcache.
	ClientSubnet bool
}

// Start runs unbound until the test ends and returns its address (UDP). Without unbound the
// test is skipped, or fails on CI (.ci/run installs it).
func Start(t testing.TB, o Options) string {
	t.Helper()
	if _, err := os.Stat(Bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("unbound is not installed (.ci/run installs it): %v", err)
		}
		t.Skipf("unbound is not installed (apt-get install unbound): %v", err)
	}
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.LocalAddr().(*net.UDPAddr)
	l.Close()
	dir := t.TempDir()
	modules := `  module-config: "validator iterator"` + "\n"
	if o.ClientSubnet {
		modules = fmt.Sprintf("  module-config: \"subnetcache validator iterator\"\n  send-client-subnet: %s\n  max-client-subnet-ipv4: 24\n", o.Server.Addr())
	}
	// The zone's top-level domain loses unbound's defaults (test. and invalid. are refused
	// by default, RFC 6761), so that unbound asks the stub for what lies below.
	labels := dns.SplitDomainName(o.Zone)
	tld := labels[len(labels)-1] + "."
	// rrset-roundrobin is off: the answers keep the order the server chose (a GSLB's
	// preference), which a resolver may otherwise rotate.
	conf := fmt.Sprintf(`server:
  interface: 127.0.0.1
  port: %d
  do-daemonize: no
  use-syslog: no
  logfile: ""
  verbosity: 1
  username: ""
  chroot: ""
  directory: %q
  pidfile: %q
  num-threads: 1
  do-tcp: no
  access-control: 127.0.0.0/8 allow
  do-not-query-localhost: no
%s  trust-anchor: "%s"
  val-log-level: 2
  qname-minimisation: no
  cache-max-ttl: 0
  cache-max-negative-ttl: 0
  aggressive-nsec: yes
  rrset-roundrobin: no
  local-zone: %q nodefault
stub-zone:
  name: %q
  stub-addr: %s@%d
remote-control:
  control-enable: no
`, addr.Port, dir, filepath.Join(dir, "unbound.pid"), modules, strings.Join(strings.Fields(o.Anchor), " "),
		tld, o.Zone, o.Server.Addr(), o.Server.Port())
	file := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := testkit.Start(t, "unbound", exec.Command(Bin, "-d", "-c", file))
	resolver := addr.String()
	for i := 0; ; i++ {
		m := new(dns.Msg)
		m.SetQuestion(o.Zone, dns.TypeSOA)
		_, _, err := (&dns.Client{Timeout: time.Second}).Exchange(m, resolver)
		if err == nil {
			return resolver
		}
		if i == 50 {
			t.Fatalf("unbound never answered: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
