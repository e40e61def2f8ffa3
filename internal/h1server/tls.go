package h1server

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
)

// TLS listeners (Options.TLSConfig).
//
// Why the loop serves HTTP/1.1 over TLS too: net/http frames HTTP/1 requests
// itself and is laxer than levee (it accepts Content-Length with
// Transfer-Encoding, drops Content-Length and keeps the connection; bare LF
// line ends; Transfer-Encoding on HTTP/1.0), so a gateway that let it read
// TLS connections could neither see nor refuse those heads. So the server
// accepts TCP connections, handshakes them itself, and decides by ALPN:
// "h2" goes to the Fallback as the *tls.Conn it is (HTTP/2 frames its own
// requests; net/http's Serve sees a completed handshake and runs its
// TLSNextProto["h2"], which guardFallbackH2 made serve it through the
// HTTP/2 flood guard, h2guard.go); anything else ("http/1.1", or no ALPN) is the loop's,
// reading and writing through the *tls.Conn (rawsock cannot reach below TLS;
// rawsock.Wrap returns a *tls.Conn as it is). Its handoffs reach net/http as
// a tlsReplayConn, whose ConnectionState gives the requests their r.TLS.

// defaultHandshakeTimeout bounds a handshake when ReadHeaderTimeout is 0:
// every handshake has a deadline, so a client that opens a connection and
// sends nothing ties up a goroutine for at most this long.
const defaultHandshakeTimeout = 10 * time.Second

// textH2PrefaceOverTLS is the reject text of an HTTP/2 preface on a TLS
// connection that did not negotiate h2.
const textH2PrefaceOverTLS = "HTTP/2 over TLS needs ALPN h2"

// handshake completes c's TLS handshake within the header timeout. It
// reports whether the loop is to serve the connection; when false, the
// connection was handed off (handedOff) or failed (the caller closes it).
func (c *conn) handshake() (serve, handedOff bool) {
	s := c.srv
	timeout := s.headerTimeout
	if timeout <= 0 {
		timeout = defaultHandshakeTimeout
	}
	tc := c.tls
	_ = c.raw.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		s.handshakes[1].Add(1) // error
		s.logger.Debug("h1server: TLS handshake", "remote", c.remote, "error", err)
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) && rh.Conn != nil && looksLikeHTTP(rh.RecordHeader) {
			// As net/http: a clear-text request to the TLS port gets a
			// plain answer saying so, rather than a reset.
			_, _ = io.WriteString(rh.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		}
		return false, false
	}
	s.handshakes[0].Add(1) // success
	// The write deadline goes; the read deadline is the loop's from here
	// (readHead sets or clears it: deadlineSet).
	_ = c.raw.SetWriteDeadline(time.Time{})
	c.deadlineSet, c.idleUntil = true, time.Time{}
	st := tc.ConnectionState()
	c.tlsState = &st
	if st.NegotiatedProtocol == "h2" {
		_ = c.raw.SetReadDeadline(time.Time{})
		if s.inShutdown.Load() {
			return false, false
		}
		return false, s.handOffTLS(tc)
	}
	return true, false
}

// handOffTLS gives a connection that negotiated h2 to the fallback as it
// is. It reports false when the server is shutting down.
func (s *Server) handOffTLS(tc *tls.Conn) bool {
	s.handoffs[handoffALPNH2].Add(1)
	s.mu.Lock()
	fl := s.mu.fallbackLn
	s.mu.Unlock()
	return fl.deliver(tc)
}

// looksLikeHTTP reports whether a TLS record header is the start of a
// clear-text HTTP request (net/http's test, which it does not export).
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// tlsReplayConn is a handed-off HTTP/1 connection over TLS. net/http
// treats a connection that is not a *tls.Conn as clear text, except that
// it takes r.TLS from a ConnectionState method (server.go,
// connectionStater): this is that method, so requests served after a
// handoff still carry r.TLS (X-Forwarded-Proto: https).
type tlsReplayConn struct {
	replayConn
	tc *tls.Conn
}

// ConnectionState is the TLS connection's.
func (c *tlsReplayConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

var _ interface {
	net.Conn
	ConnectionState() tls.ConnectionState
} = (*tlsReplayConn)(nil)
