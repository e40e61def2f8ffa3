package proxy

// Address allow and deny lists (routes[].access, server.access): checked
// right after the route is known, on the real client address (x.client,
// clientaddr.go), before any credential is looked at or any body byte
// read. A denied address gets 403 address_denied.
//
// A PrefixSet holds its prefixes as sorted, merged address ranges, one
// slice per family, so a lookup is a binary search over at most
// log2(config.MaxAccessPrefixes)+1 steps and allocates nothing.

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// Access is a route's address lists. A nil *Access allows everyone.
type Access struct {
	// Allow, when not empty, is the only addresses admitted; Deny's are
	// refused even when Allow holds them.
	Allow, Deny PrefixSet
}

// NewAccess builds the lists from parsed prefixes.
func NewAccess(allow, deny []netip.Prefix) *Access {
	return &Access{Allow: NewPrefixSet(allow), Deny: NewPrefixSet(deny)}
}

// Permits reports whether a (compared unmapped) may call.
func (a *Access) Permits(addr netip.Addr) bool {
	addr = addr.Unmap()
	if a.Deny.Contains(addr) {
		return false
	}
	return a.Allow.Empty() || a.Allow.Contains(addr)
}

// permitsClient is Permits on an exchange's client ("host:port", or an
// address alone when a trusted proxy's header named it). A client that is
// not an IP address (a Unix socket's peer) is refused: the lists cannot
// place it, and an access list is a restriction.
func (a *Access) permitsClient(client string) bool {
	addr, ok := clientAddr(client)
	return ok && a.Permits(addr)
}

// clientAddr parses an exchange's client ("host:port" or an address
// alone), unmapped. The form is told apart first (a parse error
// allocates): "[v6]:port" and "v4:port" have a port, a bare IPv6 address
// has several colons.
func clientAddr(client string) (netip.Addr, bool) {
	if strings.HasPrefix(client, "[") || strings.Count(client, ":") == 1 {
		ap, err := netip.ParseAddrPort(client)
		return ap.Addr().Unmap(), err == nil
	}
	ad, err := netip.ParseAddr(client)
	return ad.Unmap(), err == nil
}

// admitAddress refuses the request when rt's address lists do not permit
// its client (403 address_denied).
func admitAddress(w http.ResponseWriter, x *exchange, rt *Route) bool {
	if rt.Access == nil || rt.Access.permitsClient(x.client) {
		return true
	}
	x.refuse(w, ReasonAddressDenied)
	return false
}

// u128 is an IPv6 address as a number.
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo) }

// next returns a+1 and whether it did not wrap.
func (a u128) next() (u128, bool) {
	if a.lo != ^uint64(0) {
		return u128{a.hi, a.lo + 1}, true
	}
	if a.hi != ^uint64(0) {
		return u128{a.hi + 1, 0}, true
	}
	return a, false
}

type range4 struct{ lo, hi uint32 }
type range6 struct{ lo, hi u128 }

// PrefixSet is a set of IP prefixes as sorted, disjoint, merged ranges.
// Immutable once built; the zero value is empty.
type PrefixSet struct {
	v4 []range4
	v6 []range6
}

// NewPrefixSet builds a set from prefixes (IPv4-mapped ones are taken as
// IPv4; invalid ones are skipped).
func NewPrefixSet(prefixes []netip.Prefix) PrefixSet {
	var s PrefixSet
	for _, p := range prefixes {
		if !p.IsValid() {
			continue
		}
		p = p.Masked()
		a := p.Addr()
		if a.Is4In6() {
			bits := p.Bits() - 96
			if bits < 0 {
				bits = 0
			}
			p = netip.PrefixFrom(a.Unmap(), bits).Masked()
			a = p.Addr()
		}
		if a.Is4() {
			b := a.As4()
			lo := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
			hi := lo | uint32(uint64(1)<<(32-p.Bits())-1)
			s.v4 = append(s.v4, range4{lo, hi})
			continue
		}
		b := a.As16()
		lo := u128{be64(b[:8]), be64(b[8:])}
		hi := lo
		host := 128 - p.Bits()
		switch {
		case host >= 64:
			hi.lo = ^uint64(0)
			hi.hi |= uint64(1)<<(host-64) - 1
			if host == 128 {
				hi.hi = ^uint64(0)
			}
		default:
			hi.lo |= uint64(1)<<host - 1
		}
		s.v6 = append(s.v6, range6{lo, hi})
	}
	slices.SortFunc(s.v4, func(a, b range4) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	slices.SortFunc(s.v6, func(a, b range6) int {
		switch {
		case a.lo.less(b.lo):
			return -1
		case b.lo.less(a.lo):
			return 1
		}
		return 0
	})
	s.v4 = merge4(s.v4)
	s.v6 = merge6(s.v6)
	return s
}

func be64(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// merge4 joins overlapping and adjacent ranges of a sorted list in place.
func merge4(rs []range4) []range4 {
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && (out[n-1].hi == ^uint32(0) || r.lo <= out[n-1].hi+1) {
			if r.hi > out[n-1].hi {
				out[n-1].hi = r.hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func merge6(rs []range6) []range6 {
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 {
			end, ok := out[n-1].hi.next()
			if !ok || !end.less(r.lo) {
				if out[n-1].hi.less(r.hi) {
					out[n-1].hi = r.hi
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// Empty reports whether the set holds no prefix.
func (s *PrefixSet) Empty() bool { return len(s.v4) == 0 && len(s.v6) == 0 }

// Contains reports whether a (IPv4-mapped compared as IPv4) is in the set.
// It allocates nothing.
func (s *PrefixSet) Contains(a netip.Addr) bool {
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		lo, hi := 0, len(s.v4) // first range with lo > v is at index lo after the search
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if s.v4[m].lo <= v {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo > 0 && v <= s.v4[lo-1].hi
	}
	if !a.Is6() {
		return false
	}
	b := a.As16()
	v := u128{be64(b[:8]), be64(b[8:])}
	lo, hi := 0, len(s.v6)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !v.less(s.v6[m].lo) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo > 0 && !s.v6[lo-1].hi.less(v)
}
