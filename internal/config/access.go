package config

import (
	"net/netip"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// Address allow and deny lists (`routes[].access`, and the server-wide
// default `server.access`): which client addresses may call a route. The
// address is the real client's (PROXY protocol, server.trusted_proxies),
// the one the per-address limits key on. A deny entry wins over an allow
// entry; an empty or omitted allow list allows every address not denied.
// A route's access replaces server.access whole (it is not merged), so a
// route can open what the default closes; `access: {}` on a route
// allows every address.

// MaxAccessPrefixes bounds each of access.allow and access.deny.
const MaxAccessPrefixes = 4096

// The field table of this file's block.
var accessBlock = engine.NewBlock(
	engine.Field{Name: "allow", Kind: engine.KindList, MaxItems: MaxAccessPrefixes, Item: &engine.Field{Kind: engine.KindString},
		Doc:   "client addresses (CIDR prefixes or addresses) allowed; every address when empty or omitted",
		Check: checkAccessList, Bind: engine.At(func(a *Access) *[]string { return &a.Allow })},
	engine.Field{Name: "deny", Kind: engine.KindList, MaxItems: MaxAccessPrefixes, Item: &engine.Field{Kind: engine.KindString},
		Doc:   "client addresses (CIDR prefixes or addresses) refused 403 address_denied, even when allow lists them",
		Check: checkAccessList, Bind: engine.At(func(a *Access) *[]string { return &a.Deny })},
)

// Access is an address allow and deny list (`access`).
type Access struct {
	// Allow lists the client addresses that may call (`allow`, CIDR
	// prefixes or single addresses, canonical after parsing, at most
	// MaxAccessPrefixes). Empty: every address (not denied).
	Allow []string
	// Deny lists the client addresses refused (`deny`, as Allow); a
	// denied address is refused even when Allow lists it.
	Deny []string
}

// AllowPrefixes and DenyPrefixes return the lists parsed.
func (a *Access) AllowPrefixes() []netip.Prefix { return Prefixes(a.Allow) }

// DenyPrefixes returns Deny parsed.
func (a *Access) DenyPrefixes() []netip.Prefix { return Prefixes(a.Deny) }

// RouteAccess returns the address lists that apply to r: its own access
// when set, else server.access; nil when neither is set.
func (c *Config) RouteAccess(r *Route) *Access {
	if r.Access != nil {
		return r.Access
	}
	return c.Server.Access
}

// checkAccessList reads a bound list of CIDR prefixes (or addresses, as
// /32 or /128) into a *[]string in canonical form, as checkPrefixList,
// but an empty list is allowed and the bound is MaxAccessPrefixes.
func checkAccessList(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	items, ok := p.Sequence(path, n)
	if !ok {
		return false
	}
	if len(items) > MaxAccessPrefixes {
		p.Add(n, path, "must list at most %d prefixes, got %d", MaxAccessPrefixes, len(items))
		return false
	}
	out, good := distinctStrings(p, path, items, "prefix ", func(s string) (string, string) {
		pf, problem := parseTrustedPrefix(s)
		return pf.String(), problem
	})
	*ptr.(*[]string) = out
	return good
}
