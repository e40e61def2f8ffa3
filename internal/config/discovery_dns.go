package config

import (
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/endpoint"
	"gopkg.in/yaml.v3"
)

// The DNS discovery sources (`discovery.dns`, `discovery.dns_srv`): an
// upstream's endpoints are the addresses a name resolves to, re-resolved
// when the answer's TTL ends. See docs/dns.md.

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	dnsBlock = engine.NewBlock(
		engine.Field{Name: "name", Kind: engine.KindString, Required: true, Doc: "host:port: every A and AAAA address of host is an endpoint on port",
			Check: engine.ProblemOf(checkDNSName), Bind: engine.At(func(d *DNSDiscovery) *string { return &d.Name })},
		engine.Field{Name: "weight", Kind: engine.KindInt, Lo: 1, Hi: maxWeight, Def: DefaultWeight, Doc: "weight of each address",
			Bind: engine.At(func(d *DNSDiscovery) *uint32 { return &d.Weight })},
		engine.Field{Name: "zone", Kind: engine.KindString, Pattern: namePattern, Doc: "zone of each address",
			Check: checkZone, Bind: engine.At(func(d *DNSDiscovery) *string { return &d.Zone })},
		engine.Field{Name: "resolver", Kind: engine.KindString, Doc: "DNS server ip:port; default the first nameserver of /etc/resolv.conf",
			Check: engine.ProblemOf(checkResolver), Bind: engine.At(func(d *DNSDiscovery) *string { return &d.Resolver })},
		engine.Field{Name: "timeout", Kind: engine.KindDuration, Def: DefaultDNSTimeout, Doc: "time to wait for one DNS answer, 100ms to 30s",
			Check: engine.CheckDurationWithin(minDNSTimeout, maxDNSTimeout), Bind: engine.At(func(d *DNSDiscovery) *time.Duration { return &d.Timeout })},
	)
	dnsSRVBlock = engine.NewBlock(
		engine.Field{Name: "name", Kind: engine.KindString, Required: true, Doc: "_service._proto.domain whose SRV records name the endpoints",
			Check: engine.ProblemOf(checkSRVName), Bind: engine.At(func(d *DNSSRVDiscovery) *string { return &d.Name })},
		engine.Field{Name: "zone", Kind: engine.KindString, Pattern: namePattern, Doc: "zone of each address",
			Check: checkZone, Bind: engine.At(func(d *DNSSRVDiscovery) *string { return &d.Zone })},
		engine.Field{Name: "resolver", Kind: engine.KindString, Doc: "DNS server ip:port; default the first nameserver of /etc/resolv.conf",
			Check: engine.ProblemOf(checkResolver), Bind: engine.At(func(d *DNSSRVDiscovery) *string { return &d.Resolver })},
		engine.Field{Name: "timeout", Kind: engine.KindDuration, Def: DefaultDNSTimeout, Doc: "time to wait for one DNS answer, 100ms to 30s",
			Check: engine.CheckDurationWithin(minDNSTimeout, maxDNSTimeout), Bind: engine.At(func(d *DNSSRVDiscovery) *time.Duration { return &d.Timeout })},
	)
)

// DNSDiscovery takes an upstream's endpoints from a name's A and AAAA
// records (`discovery.dns`). Comparable: a reload compares it with ==.
type DNSDiscovery struct {
	// Name is "host:port" (`name`, required): host a DNS name (not an IP
	// address), port 1 to 65535. Every address host resolves to is an
	// endpoint on port.
	Name string
	// Weight is each address's weight (`weight`, 1 to 10000). Default 1.
	Weight uint32
	// Zone is each address's zone (`zone`, as an endpoint's). Default "".
	Zone string
	// Resolver is the DNS server queried, "ip:port" (`resolver`). ""
	// means the first nameserver of /etc/resolv.conf.
	Resolver string
	// Timeout bounds one query (`timeout`, 100ms to 30s). Default
	// DefaultDNSTimeout (2s).
	Timeout time.Duration
}

// DNSSRVDiscovery takes an upstream's endpoints from SRV records
// (`discovery.dns_srv`): the targets of the lowest priority, on the
// records' ports with the records' weights. Comparable.
type DNSSRVDiscovery struct {
	// Name is the SRV name, "_service._proto.domain" (`name`, required).
	Name string
	// Zone is every address's zone (`zone`). Default "".
	Zone string
	// Resolver and Timeout as DNSDiscovery's.
	Resolver string
	Timeout  time.Duration
}

// Defaults and bounds of this file's fields.
const (
	// DefaultDNSTimeout is the `timeout` of a DNS source when omitted.
	DefaultDNSTimeout = 2 * time.Second
	minDNSTimeout     = 100 * time.Millisecond
	maxDNSTimeout     = 30 * time.Second
)

// dnsDiscovery reads `discovery.dns`.
func (p *parser) dnsDiscovery(path string, n *yaml.Node) *DNSDiscovery {
	d := engine.WithDefaults(dnsBlock, &DNSDiscovery{})
	if f, ok := p.Block(path, n, dnsBlock); ok {
		p.Bind(f, n, path, dnsBlock, d)
	}
	return d
}

// dnsSRVDiscovery reads `discovery.dns_srv`.
func (p *parser) dnsSRVDiscovery(path string, n *yaml.Node) *DNSSRVDiscovery {
	d := engine.WithDefaults(dnsSRVBlock, &DNSSRVDiscovery{})
	if f, ok := p.Block(path, n, dnsSRVBlock); ok {
		p.Bind(f, n, path, dnsSRVBlock, d)
	}
	return d
}

// checkDNSName checks `dns.name`: host:port with host a DNS name.
func checkDNSName(s string) string {
	if pr := checkAddress(s, false); pr != "" {
		return "must be host:port with host a DNS name: " + pr
	}
	host, _, _ := net.SplitHostPort(s)
	if _, err := netip.ParseAddr(host); err == nil {
		return "host must be a DNS name, not an IP address (list an address under endpoints)"
	}
	return ""
}

// checkSRVName checks `dns_srv.name`: "_service._proto.domain", a DNS
// name whose first two labels start with "_" and whose domain is a DNS
// name.
func checkSRVName(s string) string {
	labels := strings.SplitN(strings.TrimSuffix(s, "."), ".", 3)
	if len(labels) < 3 || len(labels[0]) < 2 || len(labels[1]) < 2 || labels[0][0] != '_' || labels[1][0] != '_' ||
		!endpoint.ValidDNSName(labels[2]) || !validSRVLabel(labels[0][1:]) || !validSRVLabel(labels[1][1:]) {
		return `must be "_service._proto.domain", as in "_http._tcp.api.internal"`
	}
	return ""
}

// validSRVLabel: 1 to 62 letters, digits and hyphens.
func validSRVLabel(s string) bool {
	if len(s) == 0 || len(s) > 62 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if !(c >= 'a' && c <= 'z' || s[i] >= '0' && s[i] <= '9' || s[i] == '-') {
			return false
		}
	}
	return true
}

// checkResolver checks a resolver address: ip:port (a name would need a
// resolver of its own).
func checkResolver(s string) string {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
		return `must be ip:port, as in "127.0.0.1:53" or "[::1]:53"`
	}
	return ""
}
