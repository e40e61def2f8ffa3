package upstream

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The client-side HTTP/2 frame guard: every connection of the h2 pool is
// wrapped in an h2ClientGuard, which reads the frame headers of what the
// endpoint sends as they pass to x/net's client (no read-ahead: it looks
// at the bytes Read returns). x/net's client answers every PING and
// acknowledges every SETTINGS frame, without a limit: an endpoint that
// floods them keeps levee's connection goroutines busy writing answers.
// The guard closes the connection, and counts it by reason, when the
// endpoint sends:
//
//   - more than h2GuardBurst PING frames (not ACKs) within h2GuardWindow:
//     "ping_flood". A PING that follows a write of levee's other than
//     PING and SETTINGS ACKs (a request's frames, a WINDOW_UPDATE) is
//     paced by levee's own traffic and not counted: gRPC servers
//     (grpc-go's BDP estimator) send a PING each time data arrives, one
//     outstanding at a time, hundreds a second under load; a flood is
//     PINGs that only levee's ACKs answer;
//   - more than h2GuardBurst SETTINGS frames (not ACKs) within
//     h2GuardWindow: "settings_flood";
//   - more than h2GuardMaxResets RST_STREAM frames in a row with no
//     HEADERS frame between them (every stream reset, no answer):
//     "reset_flood";
//   - more than h2GuardMaxContinuations CONTINUATION frames in one
//     header block: "continuation_flood" (x/net bounds a block's bytes
//     by MaxHeaderListSize but reads empty CONTINUATIONs without end);
//   - a GOAWAY: counted ("goaway"), not closed (x/net retires the
//     connection itself: no new stream, the open ones finish).
//
// When a limit trips in the middle of what one Read returned, Read
// returns the bytes before the offending frame (a header split across
// reads has its first bytes passed already: x/net then holds a partial
// frame header, never a frame); every later Read fails with errH2Guard,
// which x/net takes as the connection's loss.

const (
	h2GuardWindow           = time.Second
	h2GuardBurst            = 32
	h2GuardMaxResets        = 32
	h2GuardMaxContinuations = 8
)

// errH2Guard is the read error of a connection the guard closed.
var errH2Guard = errors.New("upstream: HTTP/2 connection closed by the frame guard")

// H2Reasons are the reasons OnError is called with (the values of the
// metric's reason label): the guard's, "goaway", and
// "header_list_too_large" (a response past MaxHeaderListSize: x/net stops
// decoding it and fails the stream; the pool retires the connection), and
// "protocol_error" (a frame x/net refuses, closing the connection: among
// others a header block whose frames exceed what is left of
// MaxHeaderListSize).
var H2Reasons = []string{"ping_flood", "settings_flood", "reset_flood", "continuation_flood", "goaway", "header_list_too_large", "protocol_error"}

// HTTP/2 frame types and flags the guard reads (RFC 9113 section 6).
const (
	h2Headers      = 0x1
	h2RSTStream    = 0x3
	h2Settings     = 0x4
	h2Ping         = 0x6
	h2GoAway       = 0x7
	h2Continuation = 0x9
	h2FlagAck      = 0x1
	h2FlagEndHdrs  = 0x4
	h2HeaderLen    = 9
)

// h2FrameScan follows the frame headers of a byte stream (the endpoint's
// side of an HTTP/2 connection, which starts with a frame). Its state is
// a few integers: no buffer beyond one frame header.
type h2FrameScan struct {
	hdr    [h2HeaderLen]byte
	hn     int    // bytes of hdr filled
	skip   uint32 // payload bytes of the current frame still to pass
	inHdrs bool   // inside a header block (HEADERS without END_HEADERS)
	conts  int    // CONTINUATIONs of the current block
	resets int    // RST_STREAMs since the last HEADERS
	// settings0 is set once the endpoint's first SETTINGS frame header
	// passed.
	settings0 bool
	// pings and settings count the frames of the current window, which
	// began at start.
	pings, settings int
	start           time.Time
	now             func() time.Time
	// paced, when set, reports (and clears) whether levee wrote traffic
	// of its own since the last PING: such a PING is not counted.
	paced func() bool
}

// scan passes p through the scanner and returns how many of its bytes
// precede a frame that breaks a limit, with the reason ("" and len(p) when
// none does), plus whether a GOAWAY began in p.
func (s *h2FrameScan) scan(p []byte) (n int, reason string, goaway bool) {
	i := 0
	for i < len(p) { // each pass consumes at least one byte
		if s.skip > 0 {
			k := min(uint32(len(p)-i), s.skip)
			s.skip -= k
			i += int(k)
			continue
		}
		frameStart := i - s.hn
		k := copy(s.hdr[s.hn:], p[i:])
		s.hn += k
		i += k
		if s.hn < h2HeaderLen {
			break
		}
		s.hn = 0
		s.skip = uint32(s.hdr[0])<<16 | uint32(s.hdr[1])<<8 | uint32(s.hdr[2])
		if r := s.frame(s.hdr[3], s.hdr[4]); r != "" {
			if r == "goaway" {
				goaway = true
				continue
			}
			return max(frameStart, 0), r, goaway
		}
	}
	return len(p), "", goaway
}

// frame accounts one frame header and returns the limit it breaks, or
// "goaway" for a GOAWAY, or "".
func (s *h2FrameScan) frame(typ, flags byte) string {
	switch typ {
	case h2Headers:
		s.resets = 0
		s.inHdrs, s.conts = flags&h2FlagEndHdrs == 0, 0
	case h2Continuation:
		if s.inHdrs {
			s.conts++
			if s.conts > h2GuardMaxContinuations {
				return "continuation_flood"
			}
			s.inHdrs = flags&h2FlagEndHdrs == 0
		}
	case h2RSTStream:
		s.resets++
		if s.resets > h2GuardMaxResets {
			return "reset_flood"
		}
	case h2Ping, h2Settings:
		if flags&h2FlagAck != 0 {
			return ""
		}
		if typ == h2Settings {
			s.settings0 = true
		}
		if now := s.now(); now.Sub(s.start) >= h2GuardWindow {
			s.start, s.pings, s.settings = now, 0, 0
		}
		if typ == h2Ping {
			if s.paced != nil && s.paced() {
				return ""
			}
			s.pings++
			if s.pings > h2GuardBurst {
				return "ping_flood"
			}
		} else {
			s.settings++
			if s.settings > h2GuardBurst {
				return "settings_flood"
			}
		}
	case h2GoAway:
		return "goaway"
	}
	return ""
}

// h2ClientGuard is a net.Conn whose reads pass through an h2FrameScan.
// Reads come from x/net's one reader goroutine; mu guards against a
// concurrent Close anyway.
type h2ClientGuard struct {
	net.Conn
	scan    h2FrameScan
	onError func(reason string)
	mu      sync.Mutex
	failed  bool
	// ready is closed when Read is called again after the endpoint's first
	// SETTINGS frame passed whole: x/net reads the connection from one
	// goroutine that handles every frame it has before reading more, so
	// the endpoint's settings (its stream limit) are applied by then.
	ready      chan struct{}
	readyShown bool
	// dead is closed when the guard closes the connection.
	dead chan struct{}
	// traffic: levee wrote something other than PING and SETTINGS ACKs
	// since the last PING the endpoint sent (Write sets it, the scan's
	// paced takes it).
	traffic atomic.Bool
}

// Write notes whether p is levee's own traffic (anything but a run of
// whole PING and SETTINGS ACK frames) before passing it on.
func (g *h2ClientGuard) Write(p []byte) (int, error) {
	if !g.traffic.Load() && !acksOnly(p) {
		g.traffic.Store(true)
	}
	return g.Conn.Write(p)
}

// acksOnly reports whether p is one or more whole PING or SETTINGS
// frames with the ACK flag (what x/net writes in answer to a flood).
// Bounded by len(p): each step passes one frame.
func acksOnly(p []byte) bool {
	if len(p) == 0 {
		return false
	}
	for len(p) > 0 {
		if len(p) < h2HeaderLen {
			return false
		}
		n := h2HeaderLen + (int(p[0])<<16 | int(p[1])<<8 | int(p[2]))
		if (p[3] != h2Ping && p[3] != h2Settings) || p[4]&h2FlagAck == 0 || n > len(p) {
			return false
		}
		p = p[n:]
	}
	return true
}

func newH2ClientGuard(c net.Conn, onError func(reason string)) *h2ClientGuard {
	g := &h2ClientGuard{Conn: c, onError: onError, ready: make(chan struct{}), dead: make(chan struct{})}
	g.scan.now = time.Now
	g.scan.start = time.Now()
	g.scan.paced = func() bool { return g.traffic.Swap(false) }
	return g
}

func (g *h2ClientGuard) Read(p []byte) (int, error) {
	if !g.readyShown && g.scan.settings0 && g.scan.skip == 0 && g.scan.hn == 0 {
		g.readyShown = true
		close(g.ready)
	}
	g.mu.Lock()
	failed := g.failed
	g.mu.Unlock()
	if failed {
		return 0, errH2Guard
	}
	n, err := g.Conn.Read(p)
	if n == 0 {
		return n, err
	}
	k, reason, goaway := g.scan.scan(p[:n])
	if goaway {
		g.onError("goaway")
	}
	if reason == "" {
		return n, err
	}
	g.mu.Lock()
	g.failed = true
	g.mu.Unlock()
	close(g.dead) // once: every later Read returns before this
	g.onError(reason)
	_ = g.Conn.Close()
	if k == 0 {
		return 0, errH2Guard
	}
	return k, nil
}
