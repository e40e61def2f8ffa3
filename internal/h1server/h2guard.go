package h1server

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// HTTP/2 flood guard: every connection handed to net/http's HTTP/2 server
// (h2c prior knowledge, and TLS with ALPN h2) is wrapped in an h2Guard,
// which reads the frame headers of both directions as they pass. What the
// client sends is read ahead into a buffer of up to 16 KiB (taken from a
// pool at the first read, given back when reads fail) and served to Go's
// server from it; the server's writes pass as they are:
//
//   - Client to server: Rapid Reset. A HEADERS frame opening a stream and
//     the RST_STREAM cancelling it right after, whole in the buffer, are
//     taken out before Go reads them (h2drop.go says when, and why each
//     condition): Go never opens the stream, so no handler runs and no
//     upstream is asked (Stats.HTTP2ResetStreamsDropped). Through Go,
//     each such stream cost about 2 us; the guard drops one in tens of
//     nanoseconds. What is left passes the checks below.
//   - Client to server: header blocks. A HEADERS (or PUSH_PROMISE) frame
//     without END_HEADERS opens a block that CONTINUATION frames extend.
//     Go's server bounds a block's decoded size but not its frames: an
//     empty-CONTINUATION flood is read at millions of frames a second
//     until the idle timeout. More than maxContinuations CONTINUATIONs in
//     one block, or more payload bytes in one block than the server's
//     MaxHeaderBytes plus headerBlockMargin, close the connection at once.
//   - Server to client: GOAWAY frames, counted by error code
//     (Stats.HTTP2GoAways). After a GOAWAY with an error code (Go sends
//     ENHANCE_YOUR_CALM on a Rapid Reset the guard does not drop,
//     PROTOCOL_ERROR, ...), Go keeps reading and decoding for a second
//     (its goAwayTimeout); the guard closes the connection as soon as the
//     GOAWAY is written, so a flooder is read no further.
//
// A frame-level violation the parser sees (a CONTINUATION outside a block,
// another frame inside one) is left to Go's server, which answers it with
// GOAWAY PROTOCOL_ERROR (then closed at once, as above).
//
// Why no GOAWAY on the flood close: the decision is made on the reading
// goroutine, while Go's writer may be in the middle of a frame (frames are
// split across writes), so a GOAWAY could only be sent after waiting for
// the writer, which a client that does not read can stall; and the frame
// would tell a flooder nothing it can use (a well-behaved client never
// sends nine CONTINUATIONs: nghttp2, under most clients, refuses a block
// of more than 8 itself). The close is counted as its own reason instead.

// maxContinuations is the most CONTINUATION frames one header block may
// have: nghttp2's limit (NGHTTP2_DEFAULT_MAX_CONTINUATIONS, since 1.61.0,
// the fix for the CONTINUATION flood CVEs of 2024). A client with a
// header block over 8 full frames (16 KiB each by default, 144 KiB) is
// over any header limit anyway.
const maxContinuations = 8

// headerBlockMargin is added to the server's MaxHeaderBytes to give the
// cap on a header block's payload bytes (as the HTTP/1 loop and net/http
// allow 4096 bytes above it for a head). net/http's server closes on a
// block that decodes to more than MaxHeaderBytes + 320 (PROTOCOL_ERROR),
// and an encoded field costs at most 7 bytes above its name and value
// while the decoded size counts 32 more, so a request it would serve
// never reaches this cap. What does: bytes that decode to no field at all
// (HPACK dynamic table size updates, allowed anywhere while the table is
// empty), which net/http reads until the block ends.
const headerBlockMargin = 4096

// h2Preface is the client connection preface (RFC 9113 section 3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// HTTP/2 frame types and flags the guard reads (RFC 9113 section 6).
const (
	h2FrameHeaders      = 0x1
	h2FramePushPromise  = 0x5
	h2FrameGoAway       = 0x7
	h2FrameContinuation = 0x9
	h2FlagEndHeaders    = 0x4
	h2FrameHeaderLen    = 9
)

// h2Verdict is the read parser's decision.
type h2Verdict uint8

const (
	h2OK                  h2Verdict = iota
	h2ContinuationFlood             // more than maxContinuations in a block
	h2HeaderBlockTooLarge           // a block's payload over the cap
	h2BadPreface                    // the stream does not start with the preface
)

// GOAWAY reasons: the error codes of RFC 9113 section 7 (their index),
// then levee's own closes. The labels of levee_http2_goaways_total.
const (
	numH2ErrCodes        = 0xe // NO_ERROR .. HTTP_1_1_REQUIRED
	goAwayUnknown        = numH2ErrCodes
	goAwayContinuation   = numH2ErrCodes + 1
	goAwayHeaderTooLarge = numH2ErrCodes + 2
	numGoAwayReasons     = numH2ErrCodes + 3
)

var goAwayNames = [numGoAwayReasons]string{
	"no_error", "protocol_error", "internal_error", "flow_control_error",
	"settings_timeout", "stream_closed", "frame_size_error", "refused_stream",
	"cancel", "compression_error", "connect_error", "enhance_your_calm",
	"inadequate_security", "http_1_1_required",
	goAwayUnknown:        "unknown",
	goAwayContinuation:   "continuation_flood",
	goAwayHeaderTooLarge: "header_block_too_large",
}

// HTTP2GoAwayReasons lists the reasons Stats.HTTP2GoAways counts by: the
// HTTP/2 error code of each GOAWAY the server wrote, in snake case
// (unknown: a code RFC 9113 does not name), and continuation_flood and
// header_block_too_large, connections levee closed itself (no GOAWAY).
func HTTP2GoAwayReasons() []string { return goAwayNames[:] }

// goAwayReason is the reason index of an error code.
func goAwayReason(code uint32) int {
	if code < numH2ErrCodes {
		return int(code)
	}
	return goAwayUnknown
}

// h2ReadParser follows the frames a client sends. It sees every byte once,
// in any split; its decisions depend only on the bytes (the fuzz target
// FuzzH2Parsers checks that splits do not change them). Not safe for
// concurrent use.
type h2ReadParser struct {
	prefaceSeen int // bytes of the preface checked so far
	hdr         [h2FrameHeaderLen]byte
	nhdr        int    // bytes of hdr filled
	remain      uint32 // payload bytes of the current frame still to pass
	inBlock     bool   // a header block is open
	conts       int    // CONTINUATION frames in the open block
	blockBytes  int64  // payload bytes of the open block
	maxBlock    int64
	frames      uint64 // frame headers read
	offset      int64  // bytes fed
	verdict     h2Verdict
	decidedAt   int64 // offset of the end of the frame header that decided
}

func newH2ReadParser(maxBlock int64) h2ReadParser {
	return h2ReadParser{maxBlock: maxBlock}
}

// feed passes b through the parser and returns its verdict; once not
// h2OK, the verdict stays and nothing more is read.
func (p *h2ReadParser) feed(b []byte) h2Verdict {
	// Each pass consumes at least one byte of b: bounded by len(b).
	for len(b) > 0 && p.verdict == h2OK {
		switch {
		case p.prefaceSeen < len(h2Preface):
			n := min(len(b), len(h2Preface)-p.prefaceSeen)
			if string(b[:n]) != h2Preface[p.prefaceSeen:p.prefaceSeen+n] {
				i := 0 // decided at the first byte that differs, however split
				for b[i] == h2Preface[p.prefaceSeen+i] {
					i++
				}
				p.verdict, p.decidedAt = h2BadPreface, p.offset+int64(i+1)
			}
			p.prefaceSeen += n
			p.offset += int64(n)
			b = b[n:]
		case p.remain > 0:
			n := uint32(min(len(b), int(min(p.remain, 1<<30))))
			p.remain -= n
			p.offset += int64(n)
			b = b[n:]
		default:
			n := copy(p.hdr[p.nhdr:], b)
			p.nhdr += n
			p.offset += int64(n)
			b = b[n:]
			if p.nhdr == h2FrameHeaderLen {
				p.nhdr = 0
				if v := p.frame(); v != h2OK {
					p.verdict, p.decidedAt = v, p.offset
				}
			}
		}
	}
	return p.verdict
}

// frame reads a complete frame header.
func (p *h2ReadParser) frame() h2Verdict {
	h := &p.hdr
	length := uint32(h[0])<<16 | uint32(h[1])<<8 | uint32(h[2])
	typ, flags := h[3], h[4]
	p.frames++
	p.remain = length
	switch typ {
	case h2FrameHeaders, h2FramePushPromise:
		// One inside an open block is Go's PROTOCOL_ERROR to answer;
		// counted as a new block here.
		p.inBlock = flags&h2FlagEndHeaders == 0
		p.conts = 0
		p.blockBytes = int64(length)
	case h2FrameContinuation:
		if !p.inBlock {
			return h2OK // outside a block: Go's PROTOCOL_ERROR
		}
		p.conts++
		p.blockBytes += int64(length)
		if p.conts > maxContinuations {
			return h2ContinuationFlood
		}
		p.inBlock = flags&h2FlagEndHeaders == 0
	default:
		// Another frame inside a block is Go's PROTOCOL_ERROR too.
		p.inBlock = false
		return h2OK
	}
	if p.blockBytes > p.maxBlock {
		return h2HeaderBlockTooLarge
	}
	return h2OK
}

// h2WriteParser follows the frames the server writes and reports each
// GOAWAY frame once its payload has passed whole.
type h2WriteParser struct {
	hdr     [h2FrameHeaderLen]byte
	nhdr    int
	remain  uint32 // payload bytes of the current frame still to pass
	goAway  bool   // the current frame is a GOAWAY
	payload [8]byte
	npay    int // bytes of the GOAWAY's payload kept (last stream ID, error code)
}

// feed passes b and calls done with the error code of every GOAWAY frame
// that ends within b (in order).
func (p *h2WriteParser) feed(b []byte, done func(code uint32)) {
	// Each pass consumes at least one byte of b, or ends a zero-length
	// frame it has just read the header of: bounded by 2*len(b).
	for len(b) > 0 {
		if p.remain > 0 {
			n := min(len(b), int(min(p.remain, 1<<30)))
			if p.goAway && p.npay < len(p.payload) {
				p.npay += copy(p.payload[p.npay:], b[:n])
			}
			p.remain -= uint32(n)
			b = b[n:]
			if p.remain == 0 {
				p.end(done)
			}
			continue
		}
		n := copy(p.hdr[p.nhdr:], b)
		p.nhdr += n
		b = b[n:]
		if p.nhdr < h2FrameHeaderLen {
			return
		}
		p.nhdr = 0
		p.remain = uint32(p.hdr[0])<<16 | uint32(p.hdr[1])<<8 | uint32(p.hdr[2])
		p.goAway, p.npay = p.hdr[3] == h2FrameGoAway, 0
		if p.remain == 0 {
			p.end(done)
		}
	}
}

// end closes the current frame.
func (p *h2WriteParser) end(done func(code uint32)) {
	if p.goAway && p.npay == len(p.payload) {
		q := &p.payload
		done(uint32(q[4])<<24 | uint32(q[5])<<16 | uint32(q[6])<<8 | uint32(q[7]))
	}
	p.goAway = false
}

// errH2Closed is what a guarded connection's Read returns once the guard
// has closed it; it wraps net.ErrClosed, which Go's HTTP/2 server takes
// for a client gone (it ends the connection without logging).
var errH2Closed = fmt.Errorf("h1server: HTTP/2 connection closed by the flood guard: %w", net.ErrClosed)

// h2Guard is a connection handed to net/http's HTTP/2 server (see above).
// Go's server reads from one goroutine and writes from one at a time; the
// locks keep each parser's state to one side regardless.
type h2Guard struct {
	net.Conn          // what Go's server reads and writes
	sock     net.Conn // closed to end the connection at once (the socket under TLS)
	srv      *Server
	// hide: preface bytes still to be taken out of the stream. Over TLS
	// the guard reads the preface itself (net/http's server is told it
	// was read, as for h2c); in clear text net/http reads it.
	hide    int
	stopped atomic.Bool

	rmu    sync.Mutex
	rp     h2ReadParser
	dp     h2Dropper
	buf    *[h2LookAhead]byte // the look-ahead buffer (h2drop.go); nil until the first read, and after reads fail
	r, w   int                // buf[r:w]: bytes read for Go and not yet taken
	hs, he int                // buf[hs:he]: bytes held back by the dropper
	rerr   error              // the error of the last read, returned once buf is empty

	wmu        sync.Mutex
	wp         h2WriteParser
	closeAfter bool // a GOAWAY with an error code was written
	onGoAway   func(code uint32)
}

func (s *Server) newH2Guard(c, sock net.Conn, hidePreface bool) *h2Guard {
	g := &h2Guard{Conn: c, sock: sock, srv: s, rp: newH2ReadParser(s.maxH2Block), dp: newH2Dropper(s.maxH2Block)}
	if hidePreface {
		g.hide = len(h2Preface)
	}
	g.onGoAway = g.goAway
	return g
}

func (g *h2Guard) Read(b []byte) (int, error) {
	if g.stopped.Load() {
		return 0, errH2Closed
	}
	g.rmu.Lock()
	defer g.rmu.Unlock()
	// Go's server reads a frame header (9 bytes), then its payload: each
	// read is served from the look-ahead buffer, refilled with one read of
	// the connection when empty. Repeats only while reads return nothing
	// for Go (the preface hidden, pairs dropped, a read of 0 bytes): at
	// most h2EmptyReads times, then 0 bytes are returned.
	for range h2EmptyReads {
		if g.r < g.w {
			n := copy(b, g.buf[g.r:g.w])
			g.r += n
			return n, nil
		}
		if err := g.rerr; err != nil {
			if g.hs < g.he {
				// The reads have ended: what was held back passes.
				g.scan(0, true)
				continue
			}
			// Returned once (a deadline's error is not final); the
			// buffer goes back to the pool when reads fail.
			g.rerr = nil
			g.releaseBuf()
			return 0, err
		}
		if len(b) == 0 {
			return 0, nil
		}
		if g.buf == nil {
			g.buf = h2ReadBufs.Get().(*[h2LookAhead]byte)
		}
		held := copy(g.buf[:], g.buf[g.hs:g.he]) // less than the buffer (h2Dropper.at)
		// What was held back is now at the front: say so before the read,
		// so that scan's final pass (a read that ends the stream) takes it
		// from there and not from where it was (FuzzH2Parsers found that).
		g.hs, g.he = 0, held
		n, err := g.Conn.Read(g.buf[held:])
		g.rerr = err
		if n == 0 && held > 0 && err == nil {
			continue
		}
		if v := g.scan(held+n, err != nil); v != h2OK {
			g.stopRead(v)
			return 0, errH2Closed
		}
	}
	return 0, nil
}

// scan passes buf[:n] (bytes held back, then a read's) through the
// dropper and the read parser; the bytes for Go are then buf[r:w], and
// those held back buf[hs:he]. final: the reads have ended.
func (g *h2Guard) scan(n int, final bool) h2Verdict {
	if final && g.hs < g.he {
		n = copy(g.buf[:], g.buf[g.hs:g.he])
	}
	before := g.dp.dropped
	ready, tail := g.dp.scan(g.buf[:n], final)
	if d := g.dp.dropped - before; d > 0 {
		g.srv.h2ResetDropped.Add(d)
	}
	g.r, g.w, g.hs, g.he = 0, ready, tail, n
	if v := g.rp.feed(g.buf[:ready]); v != h2OK {
		return v
	}
	if g.hide > 0 {
		k := min(ready, g.hide)
		g.r = k
		g.hide -= k
	}
	return h2OK
}

// h2EmptyReads bounds the reads of the connection one Read makes while
// they leave nothing for Go (a read of the whole preface over TLS, a read
// of dropped pairs only, ...).
const h2EmptyReads = 64

// releaseBuf gives the look-ahead buffer back to the pool (under rmu, with
// nothing in it for Go).
func (g *h2Guard) releaseBuf() {
	if g.buf != nil {
		h2ReadBufs.Put(g.buf)
		g.buf = nil
	}
	g.r, g.w, g.hs, g.he = 0, 0, 0, 0
}

// stopRead closes the connection on the read parser's verdict v.
func (g *h2Guard) stopRead(v h2Verdict) {
	reason := -1
	switch v {
	case h2ContinuationFlood:
		reason = goAwayContinuation
	case h2HeaderBlockTooLarge:
		reason = goAwayHeaderTooLarge
	}
	if reason >= 0 {
		g.srv.goAways[reason].Add(1)
	}
	g.srv.logger.Debug("h1server: HTTP/2 connection closed", "remote", g.RemoteAddr(),
		"verdict", v.String(), "frames", g.rp.frames, "continuations", g.rp.conts, "block_bytes", g.rp.blockBytes)
	if hook := g.srv.testHookH2Stop.Load(); hook != nil {
		(*hook)(v, g.rp.frames, g.rp.conts)
	}
	g.releaseBuf()
	g.stop()
}

// stop closes the connection at once; Read returns errH2Closed from then.
func (g *h2Guard) stop() {
	if !g.stopped.Swap(true) {
		_ = g.sock.Close()
	}
}

func (g *h2Guard) Write(b []byte) (int, error) {
	g.wmu.Lock()
	n, err := g.Conn.Write(b)
	g.wp.feed(b[:n], g.onGoAway)
	closeNow := g.closeAfter
	g.wmu.Unlock()
	if closeNow {
		// The GOAWAY has been written (to the socket's buffer): nothing
		// more is read, and Go's server ends the connection on the read
		// error instead of reading on for its goAwayTimeout.
		g.stop()
	}
	return n, err
}

// goAway counts a GOAWAY written with the error code code.
func (g *h2Guard) goAway(code uint32) {
	g.srv.goAways[goAwayReason(code)].Add(1)
	if code != 0 {
		g.closeAfter = true
	}
}

// Close closes the connection (Go's server calls it when it is done).
func (g *h2Guard) Close() error {
	g.stopped.Store(true)
	return g.Conn.Close()
}

// h2GuardTLS is a guarded HTTP/2 connection over TLS: Go's HTTP/2 server
// takes the TLS state from its ConnectionState (and checks the version
// and cipher suite as for a *tls.Conn).
type h2GuardTLS struct {
	*h2Guard
	tc *tls.Conn
}

// ConnectionState is the TLS connection's.
func (g h2GuardTLS) ConnectionState() tls.ConnectionState { return g.tc.ConnectionState() }

// unencryptedConn carries a connection to net/http's "unencrypted_http2"
// TLSNextProto entry, which takes a *tls.Conn whose NetConn has this
// method (the way net/http passes h2c connections to its HTTP/2 server).
type unencryptedConn struct {
	net.Conn // nil: never used
	c        net.Conn
}

func (u unencryptedConn) UnencryptedNetConn() net.Conn { return u.c }

// nextProtoUnencryptedHTTP2 is net/http's TLSNextProto key for HTTP/2
// connections that are not *tls.Conns.
const nextProtoUnencryptedHTTP2 = "unencrypted_http2"

// guardFallbackH2 puts the guard in front of the Fallback's HTTP/2 over
// TLS. net/http serves a *tls.Conn that negotiated h2 through
// TLSNextProto["h2"], which needs the *tls.Conn itself (so no wrapper can
// stand between); its "unencrypted_http2" entry serves any net.Conn, with
// the preface already read. The h2 entry is replaced by one that passes
// the guarded connection (with the TLS state) to the other. net/http
// fills TLSNextProto when Serve starts, before its first Accept; this
// runs in that first Accept (chanListener), so before any connection is
// served and on the goroutine that filled the map. Without both entries
// (HTTP/2 off, or a TLSNextProto of the caller's own) it changes nothing.
func (s *Server) guardFallbackH2() {
	tnp := s.fallback.TLSNextProto
	h2, unenc := tnp["h2"], tnp[nextProtoUnencryptedHTTP2]
	if h2 == nil || unenc == nil {
		if h2 != nil {
			s.logger.Warn("h1server: the fallback's HTTP/2 cannot be guarded (no unencrypted_http2 entry); HTTP/2 over TLS is served unguarded")
		}
		return
	}
	tnp["h2"] = func(hs *http.Server, tc *tls.Conn, h http.Handler) {
		g := s.newH2Guard(tc, tc.NetConn(), true)
		unenc(hs, tls.Client(unencryptedConn{c: h2GuardTLS{g, tc}}, nil), h)
	}
}

func (v h2Verdict) String() string {
	switch v {
	case h2OK:
		return "ok"
	case h2ContinuationFlood:
		return "continuation_flood"
	case h2HeaderBlockTooLarge:
		return "header_block_too_large"
	case h2BadPreface:
		return "bad_preface"
	}
	return "unknown"
}
