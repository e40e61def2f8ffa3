package proxy

// The client address of a request, computed once (ServeHTTP, into the
// exchange) and read by everything that keys on it: the per-address rate
// limits, the fair admission queue's consumer key of an anonymous caller,
// a consistent hash on client_ip, the access log, and the X-Forwarded-For
// sent upstream.
//
// Without trusted proxies (Options.TrustedProxies empty) it is the peer,
// r.RemoteAddr (which a PROXY protocol header may have set, h1server),
// and costs nothing. With them, when the peer is trusted, the client is
// the right-most address of the header (X-Forwarded-For, or Forwarded's
// for= parameters) that is not trusted, walking from the right at most
// maxForwardedHops entries; the X-Forwarded-For sent upstream is the chain
// from that client to the peer, the peer appended. When the peer is not
// trusted its header is ignored: the client is the peer and the upstream
// gets the peer's address alone (upstream.Outbound.ForwardedFor).
//
// A malformed entry (not an IP address, with or without a port; in
// Forwarded, an element without for=, an "unknown" or obfuscated node)
// stops the walk where it is: the client is then the last address walked,
// a trusted proxy (the peer when it was the first entry). Nothing is
// refused: a client cannot choose its address by writing garbage, only
// share its proxy's.

import (
	"net/http"
	"net/netip"
	"strings"
)

// maxForwardedHops bounds the entries walked in one request's header.
const maxForwardedHops = 32

// TrustedProxies are the peers whose forwarding header names the client
// (Options.TrustedProxies).
type TrustedProxies struct {
	// Prefixes are the trusted peers' addresses; IPv4 as IPv4 (an
	// IPv4-mapped address is compared unmapped).
	Prefixes []netip.Prefix
	// Forwarded: read the Forwarded header's for= (RFC 7239) rather than
	// X-Forwarded-For.
	Forwarded bool
}

func (tp *TrustedProxies) trusts(a netip.Addr) bool {
	for _, p := range tp.Prefixes { // at most config.MaxTrustedPrefixes
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddress returns r's client (the peer's "host:port", or the address
// alone when a trusted proxy's header named it) and the X-Forwarded-For to
// send upstream ("" when the peer is the client: its address alone).
func clientAddress(r *http.Request, tp *TrustedProxies) (client, xff string) {
	if tp == nil {
		return r.RemoteAddr, ""
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !tp.trusts(peer.Addr().Unmap()) {
		return r.RemoteAddr, ""
	}
	var hops [maxForwardedHops]netip.Addr
	n := walkForwarded(r.Header, tp, &hops)
	if n == 0 {
		return r.RemoteAddr, peer.Addr().Unmap().String()
	}
	var b strings.Builder
	for i := n - 1; i >= 0; i-- {
		b.WriteString(hops[i].String())
		b.WriteString(", ")
	}
	b.WriteString(peer.Addr().Unmap().String())
	return hops[n-1].String(), b.String()
}

// walkForwarded fills hops with the header's addresses from the right, up
// to and including the first one not trusted, and returns how many. It
// stops early at a malformed entry and after maxForwardedHops.
func walkForwarded(h http.Header, tp *TrustedProxies, hops *[maxForwardedHops]netip.Addr) int {
	name := "X-Forwarded-For"
	if tp.Forwarded {
		name = "Forwarded"
	}
	values := h[name]
	n := 0
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for {
			if n == maxForwardedHops {
				return n
			}
			var entry string
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				entry, v = v[j+1:], v[:j]
			} else {
				entry, v = v, ""
			}
			var a netip.Addr
			var ok bool
			if tp.Forwarded {
				a, ok = forwardedFor(entry)
			} else {
				a, ok = parseHop(trimOWS(entry))
			}
			if !ok {
				return n
			}
			hops[n] = a
			n++
			if !tp.trusts(a) {
				return n
			}
			if v == "" {
				break
			}
		}
	}
	return n
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseHop parses one node: an IP address, "IPv4:port" or "[IPv6]:port"
// (some proxies add the port); no zone. IPv4-mapped addresses unmapped.
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), a.Zone() == ""
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), ap.Addr().Zone() == ""
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' { // Forwarded's "[2001:db8::1]"
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() && a.Zone() == "" {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// forwardedFor returns the for= node of one Forwarded element (RFC 7239
// section 4: pairs separated by ";", the value a token or a quoted string
// without escapes), when it is an address.
func forwardedFor(element string) (netip.Addr, bool) {
	for element != "" {
		var pair string
		if j := strings.IndexByte(element, ';'); j >= 0 {
			pair, element = element[:j], element[j+1:]
		} else {
			pair, element = element, ""
		}
		k, v, ok := strings.Cut(trimOWS(pair), "=")
		if !ok || !strings.EqualFold(k, "for") {
			continue
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
			if strings.ContainsAny(v, "\"\\") {
				return netip.Addr{}, false
			}
		} else if strings.ContainsAny(v, "\"[]:") {
			return netip.Addr{}, false // an IPv6 node or a port must be quoted
		}
		return parseHop(v)
	}
	return netip.Addr{}, false
}

// clientIP parses a client address as clientAddress gives it (with or
// without a port), unmapped.
func clientIP(client string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(client); err == nil {
		return ap.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(client)
	return a.Unmap(), err == nil
}
