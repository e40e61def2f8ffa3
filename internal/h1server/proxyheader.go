package h1server

// The PROXY protocol on the data listener (Options.ProxyProtocol): each
// connection from a trusted peer starts with a header (version 1 or 2,
// internal/proxyproto) naming the client whose connection the peer
// relays; from then on that client is the connection's remote address
// everywhere: the loop's requests' RemoteAddr, the connections handed to
// net/http (their RemoteAddr, so HTTP/2 and upgraded requests agree), the
// access log and the per-address connection cap (ProxyProtocol.Claim).

import (
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/levee-gw/levee/internal/proxyproto"
)

// ProxyProtocol makes the listener read a PROXY protocol header first.
type ProxyProtocol struct {
	// Trusted are the peers allowed to send one: a connection from any
	// other address is closed at once, unanswered (reason "untrusted").
	// From a trusted peer a missing or malformed header closes the
	// connection too (counted by reason, Stats.ProxyProtocolRefused).
	Trusted []netip.Prefix
	// Claim, when set, is called once the connection's client is known
	// (the header's source, or the peer's address for a LOCAL or
	// UNKNOWN header), with the connection as accepted; false: it was
	// refused (Claim has answered and closed it). The gateway counts the
	// per-address connection cap here (netlimit.Claim).
	Claim func(nc net.Conn, client netip.Addr) bool
}

// proxyReasonIndex maps proxyproto's reasons to Stats slots.
func proxyReasonIndex(reason string) int {
	for i, r := range proxyproto.Reasons() {
		if r == reason {
			return i
		}
	}
	return len(proxyproto.Reasons()) - 1 // unreachable: ReasonOf returns one of them
}

// numProxyReasons is len(proxyproto.Reasons()).
const numProxyReasons = 6

// ProxyProtocolReasons lists the reasons Stats.ProxyProtocolRefused counts by.
func ProxyProtocolReasons() []string { return proxyproto.Reasons() }

func trusted(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes { // bounded by the configuration
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// readProxyHeader reads the connection's PROXY header within the read
// header timeout (from the accept), checks the peer first, and makes the
// header's source the connection's remote address. false: the connection
// is to be closed (counted).
func (c *conn) readProxyHeader() bool {
	s := c.srv
	pp := s.proxyProtocol
	base := c.nc
	if c.tls != nil {
		base = c.raw
	}
	peer := addrPortOf(base.RemoteAddr())
	if !trusted(pp.Trusted, peer.Addr()) {
		s.proxyRefused[proxyReasonIndex(proxyproto.ReasonUntrusted)].Add(1)
		s.logger.Debug("h1server: PROXY protocol from an untrusted peer", "remote", c.remote)
		return false
	}
	timeout := s.headerTimeout
	if timeout <= 0 {
		timeout = defaultHandshakeTimeout
	}
	_ = base.SetReadDeadline(c.accepted.Add(timeout))
	h, err := proxyproto.Read(base)
	if err != nil {
		s.proxyRefused[proxyReasonIndex(proxyproto.ReasonOf(err))].Add(1)
		s.logger.Debug("h1server: PROXY protocol header refused", "remote", c.remote, "error", err)
		return false
	}
	_ = base.SetReadDeadline(time.Time{})
	s.proxyAccepted[h.Version-1].Add(1)
	client := peer.Addr()
	if h.Command == proxyproto.Proxy {
		client = h.Source.Addr()
		ac := &addrConn{Conn: base, remote: net.TCPAddrFromAddrPort(h.Source)}
		c.remote = h.Source.String()
		if c.tls != nil {
			// The TLS connection is made again over the wrapper, before
			// any byte of it was read, so that its RemoteAddr (what
			// net/http gives an HTTP/2 request) is the client's.
			c.raw = ac
			c.tls = tls.Server(ac, s.tlsConfig)
			c.nc, c.sock = c.tls, c.tls
		} else {
			c.nc = ac // c.sock keeps the socket's raw reads (rawsock)
		}
	}
	if pp.Claim != nil && !pp.Claim(base, client) {
		return false
	}
	return true
}

func addrPortOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	if a == nil {
		return netip.AddrPort{}
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// addrConn is a connection whose remote address is the one its PROXY
// header gave. It forwards CloseWrite and SyscallConn (the loop's
// lingering close, rawsock) to the connection it wraps.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c *addrConn) RemoteAddr() net.Addr { return c.remote }

func (c *addrConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

func (c *addrConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}
