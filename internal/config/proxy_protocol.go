package config

import (
	"net/netip"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// The real client address: `server.proxy_protocol` (a PROXY protocol
// header, versions 1 and 2, from the peers it trusts) and
// `server.trusted_proxies` with `server.trusted_proxies_header` (which
// peers' X-Forwarded-For or Forwarded header names the client). See
// docs/behind-a-load-balancer.md.

// ProxyProtocol makes the data listener read a PROXY protocol header at
// the start of every connection (`server.proxy_protocol`).
type ProxyProtocol struct {
	// Trusted are the peers allowed to send one (`trusted`, required, 1
	// to MaxTrustedPrefixes CIDR prefixes or single addresses, distinct,
	// written in canonical form after parsing: "10.0.0.0/8",
	// "192.0.2.7/32"). A connection from any other peer is closed
	// unanswered; from a trusted peer, one without a valid header is too.
	Trusted []string
}

// MaxTrustedPrefixes bounds server.proxy_protocol.trusted and
// server.trusted_proxies (each request or connection checks its peer
// against every prefix).
const MaxTrustedPrefixes = 64

// The accepted values of Server.TrustedProxiesHeader.
const (
	TrustedHeaderXFF       = "x-forwarded-for"
	TrustedHeaderForwarded = "forwarded"
)

// DefaultTrustedProxiesHeader is Server.TrustedProxiesHeader when omitted.
const DefaultTrustedProxiesHeader = TrustedHeaderXFF

var trustedHeaders = []string{TrustedHeaderXFF, TrustedHeaderForwarded}

var proxyProtocolBlock = engine.NewBlock(
	engine.Field{Name: "trusted", Kind: engine.KindList, Required: true, MinItems: 1, MaxItems: MaxTrustedPrefixes, Item: &engine.Field{Kind: engine.KindString},
		Doc:   "peers (CIDR prefixes or addresses) that may send a PROXY header; any other peer's connection is closed",
		Check: checkPrefixList, Bind: engine.At(func(pp *ProxyProtocol) *[]string { return &pp.Trusted })},
)

// checkPrefixList reads a bound list of CIDR prefixes (or single
// addresses, as /32 or /128) into a *[]string in canonical form: each
// must parse, have no bits set past its length, not be an IPv4-mapped
// IPv6 prefix (addresses are compared unmapped), and not repeat.
func checkPrefixList(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	items, ok := p.Sequence(path, n)
	if !ok {
		return false
	}
	if len(items) == 0 || len(items) > MaxTrustedPrefixes {
		p.Add(n, path, "must list 1 to %d prefixes, got %d", MaxTrustedPrefixes, len(items))
		return false
	}
	out, good := distinctStrings(p, path, items, "prefix ", func(s string) (string, string) {
		pf, problem := parseTrustedPrefix(s)
		return pf.String(), problem
	})
	*ptr.(*[]string) = out
	return good
}

// parseTrustedPrefix parses one trusted prefix, or says what is wrong.
func parseTrustedPrefix(s string) (netip.Prefix, string) {
	pf, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil || a.Zone() != "" {
			return netip.Prefix{}, "must be a CIDR prefix such as \"10.0.0.0/8\" or an address, got " + engine.Quote(s)
		}
		pf = netip.PrefixFrom(a, a.BitLen())
	}
	if pf.Addr().Is4In6() {
		return netip.Prefix{}, "an IPv4-mapped IPv6 prefix never matches (addresses are compared as IPv4): write " + engine.Quote(s) + " in IPv4 form"
	}
	if m := pf.Masked(); m != pf {
		return netip.Prefix{}, "has bits set past its length: did you mean " + engine.Quote(m.String()) + "?"
	}
	return pf, ""
}

// Prefixes parses prefixes that a checkPrefixList already accepted.
func Prefixes(list []string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if pf, problem := parseTrustedPrefix(s); problem == "" {
			out = append(out, pf)
		}
	}
	return out
}
