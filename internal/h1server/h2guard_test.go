package h1server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests of the HTTP/2 flood guard (h2guard.go): raw frames over real
// sockets, h2c prior knowledge and TLS with ALPN h2, against the Server
// and its net/http fallback.

// h2Frame is one frame: its 9-byte header and payload.
func h2Frame(typ, flags byte, stream uint32, payload []byte) []byte {
	b := make([]byte, h2FrameHeaderLen, h2FrameHeaderLen+len(payload))
	b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:], stream&0x7fffffff)
	return append(b, payload...)
}

// Frame types and flags the tests write besides the guard's own.
const (
	h2FrameData          = 0x0
	h2FlagEndStream      = 0x1
	h2ErrCodeCancel      = 0x8
	h2ErrEnhanceYourCalm = 0xb
)

// hpackInt encodes v as an HPACK integer with an n-bit prefix whose high
// bits are first (RFC 7541 section 5.1).
func hpackInt(first byte, n uint, v int) []byte {
	max := 1<<n - 1
	if v < max {
		return []byte{first | byte(v)}
	}
	b := []byte{first | byte(max)}
	for v -= max; v >= 128; v >>= 7 {
		b = append(b, byte(v%128)|0x80)
	}
	return append(b, byte(v))
}

// hpackString is a string literal without Huffman coding.
func hpackString(s string) []byte { return append(hpackInt(0, 7, len(s)), s...) }

// hpackGet is the header block of GET path on authority: :method GET and
// :scheme (indexed), :path and :authority literals without indexing with
// indexed names, and the extra fields as literals with new names.
func hpackGet(https bool, authority, path string, extra ...string) []byte {
	b := []byte{0x82, 0x86} // :method GET, :scheme http
	if https {
		b[1] = 0x87 // :scheme https
	}
	b = append(append(b, hpackInt(0, 4, 4)...), hpackString(path)...)      // :path
	b = append(append(b, hpackInt(0, 4, 1)...), hpackString(authority)...) // :authority
	for i := 0; i+1 < len(extra); i += 2 {
		b = append(append(append(b, 0), hpackString(extra[i])...), hpackString(extra[i+1])...)
	}
	return b
}

// h2Conn is a raw HTTP/2 client connection.
type h2Conn struct {
	t     *testing.T
	c     net.Conn
	br    *bufio.Reader
	https bool
}

// dialH2 opens an HTTP/2 connection for the test t (TLS with ALPN h2 when the server has
// TLS, h2c prior knowledge otherwise) and sends the preface and an empty
// SETTINGS frame.
func (ts *testServer) dialH2(t *testing.T, https bool) *h2Conn {
	t.Helper()
	var c net.Conn
	if https {
		tc, _ := ts.dialTLS("h2")
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			t.Fatalf("ALPN %q, want h2", p)
		}
		c = tc
	} else {
		c, _ = ts.dial()
	}
	h := &h2Conn{t: t, c: c, br: bufio.NewReader(c), https: https}
	h.write([]byte(h2Preface), h2Frame(h2FrameSettings, 0, 0, nil))
	return h
}

func (h *h2Conn) write(frames ...[]byte) error {
	_, err := h.c.Write(bytes.Join(frames, nil))
	return err
}

type h2ReadFrame struct {
	typ, flags byte
	stream     uint32
	payload    []byte
}

func (h *h2Conn) readFrame() (h2ReadFrame, error) {
	var hdr [h2FrameHeaderLen]byte
	if _, err := io.ReadFull(h.br, hdr[:]); err != nil {
		return h2ReadFrame{}, err
	}
	f := h2ReadFrame{typ: hdr[3], flags: hdr[4], stream: binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff}
	f.payload = make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
	_, err := io.ReadFull(h.br, f.payload)
	return f, err
}

// response reads frames until stream's response is complete and returns
// its status (200 only: the fallback's encoder sends it as static index 8)
// and body; a GOAWAY or an error fails the test.
func (h *h2Conn) response(stream uint32) (int, string) {
	h.t.Helper()
	status := 0
	var body []byte
	for i := 0; i < 1000; i++ {
		f, err := h.readFrame()
		if err != nil {
			h.t.Fatalf("reading the response to stream %d: %v", stream, err)
		}
		if f.typ == h2FrameGoAway {
			h.t.Fatalf("GOAWAY %x", f.payload)
		}
		if f.stream != stream {
			continue
		}
		switch f.typ {
		case h2FrameHeaders:
			if len(f.payload) > 0 && f.payload[0] == 0x88 {
				status = 200
			} else {
				status = -1
			}
		case h2FrameData:
			body = append(body, f.payload...)
		case h2FrameRSTStream:
			h.t.Fatalf("RST_STREAM %x on stream %d", f.payload, stream)
		}
		if f.flags&h2FlagEndStream != 0 {
			return status, string(body)
		}
	}
	h.t.Fatal("no end of stream in 1000 frames")
	return 0, ""
}

// expectClosed reads until the server closes the connection (EOF or a
// reset) and returns the GOAWAY frames it sent before.
func (h *h2Conn) expectClosed() (goAways []uint32) {
	h.t.Helper()
	goAways, err := h.untilClosed()
	if err != nil {
		h.t.Fatal(err)
	}
	return goAways
}

// untilClosed is expectClosed for another goroutine than the test's: an
// error says the connection stayed open (its deadline passed).
func (h *h2Conn) untilClosed() (goAways []uint32, err error) {
	for {
		f, err := h.readFrame()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return goAways, errors.New("the connection stayed open")
		}
		if err != nil {
			return goAways, nil
		}
		if f.typ == h2FrameGoAway && len(f.payload) >= 8 {
			goAways = append(goAways, binary.BigEndian.Uint32(f.payload[4:]))
		}
	}
}

// splitBlock frames block as HEADERS then len(sizes) CONTINUATIONs of the
// given sizes (the last takes the rest), END_HEADERS on the last.
func splitBlock(stream uint32, block []byte, sizes ...int) [][]byte {
	var frames [][]byte
	typ, flags := byte(h2FrameHeaders), byte(h2FlagEndStream)
	for i := 0; i <= len(sizes); i++ {
		n := len(block)
		if i < len(sizes) {
			n = min(sizes[i], len(block))
		}
		f := flags
		if i == len(sizes) {
			f |= h2FlagEndHeaders
		}
		frames = append(frames, h2Frame(typ, f, stream, block[:n]))
		block = block[n:]
		typ, flags = h2FrameContinuation, 0
	}
	return frames
}

// guardStops records the guard's read-side closes (testHookH2Stop).
type guardStops struct {
	mu    sync.Mutex
	stops []string
}

func (g *guardStops) hook(v h2Verdict, frames uint64, conts int) {
	g.mu.Lock()
	g.stops = append(g.stops, fmt.Sprintf("%v frames=%d continuations=%d", v, frames, conts))
	g.mu.Unlock()
}

func (g *guardStops) get() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.stops...)
}

// h2Servers runs f against a clear-text server (h2c) and a TLS one (ALPN
// h2), both with the fallback's header cap at 4096 bytes (the guard's
// block cap 8192) and the guard's stops recorded.
func h2Servers(t *testing.T, h http.Handler, f func(t *testing.T, ts *testServer, https bool, stops *guardStops)) {
	for _, https := range []bool{false, true} {
		name := "h2c"
		if https {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			stops := new(guardStops)
			tweak := func(o *Options) {
				o.Fallback.MaxHeaderBytes = 4096
				o.Fallback.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 4}
			}
			var ts *testServer
			if https {
				ts = tlsServer(t, h, tweak)
			} else {
				ts = startServer(t, h, tweak)
			}
			hook := stops.hook
			ts.srv.testHookH2Stop.Store(&hook)
			f(t, ts, https, stops)
		})
	}
}

// TestH2ContinuationFlood: a header block of HEADERS and up to 8
// CONTINUATIONs is served; the 9th CONTINUATION of a block (empty ones, in
// a flood) closes the connection before net/http reads it, and a block
// over the byte cap is closed too; each counted by reason.
func TestH2ContinuationFlood(t *testing.T) {
	h2Servers(t, echo, func(t *testing.T, ts *testServer, https bool, stops *guardStops) {
		t.Run("3 continuations served", func(t *testing.T) {
			h := ts.dialH2(t, https)
			block := hpackGet(https, "h", "/three", "x-a", strings.Repeat("a", 300), "x-b", "b")
			h.write(splitBlock(1, block, 100, 100, 100)...)
			status, body := h.response(1)
			if status != 200 || body != "GET /three  h " {
				t.Fatalf("%d %q", status, body)
			}
		})
		t.Run("8 continuations served", func(t *testing.T) {
			h := ts.dialH2(t, https)
			block := hpackGet(https, "h", "/eight")
			// Empty CONTINUATIONs, then the block in the 8th.
			h.write(splitBlock(1, block, 0, 0, 0, 0, 0, 0, 0, 0)...)
			status, body := h.response(1)
			if status != 200 || body != "GET /eight  h " {
				t.Fatalf("%d %q", status, body)
			}
			// And a second block on the same connection starts afresh.
			h.write(splitBlock(3, hpackGet(https, "h", "/again"), 1, 1, 1, 1, 1, 1, 1, 1)...)
			if status, body := h.response(3); status != 200 || body != "GET /again  h " {
				t.Fatalf("%d %q", status, body)
			}
		})
		if s := stops.get(); len(s) != 0 {
			t.Fatalf("guard closes on valid blocks: %v", s)
		}
		t.Run("empty CONTINUATION flood", func(t *testing.T) {
			h := ts.dialH2(t, https)
			block := hpackGet(https, "h", "/flood")
			h.write(h2Frame(h2FrameHeaders, h2FlagEndStream, 1, block[:3]))
			empty := bytes.Repeat(h2Frame(h2FrameContinuation, 0, 1, nil), 1000)
			sent := 0
			// Until the server closes (a write fails), at most 10,000
			// batches (10 M frames) so the test ends either way.
			type result struct {
				goAways []uint32
				err     error
			}
			done := make(chan result, 1)
			go func() {
				g, err := h.untilClosed()
				done <- result{g, err}
			}()
			var res *result
			for i := 0; i < 10000 && res == nil; i++ {
				if _, err := h.c.Write(empty); err != nil {
					break
				}
				sent += 1000
				select {
				case r := <-done:
					res = &r
				default:
				}
			}
			if res == nil {
				r := <-done // bounded by the connection's 10 s deadline
				res = &r
			}
			if res.err != nil {
				t.Fatal(res.err)
			}
			if len(res.goAways) != 0 {
				t.Errorf("GOAWAYs %v before the close, want none", res.goAways)
			}
			t.Logf("the client got %d empty CONTINUATIONs written before the close", sent)
			// SETTINGS, HEADERS, 8 CONTINUATIONs passed, the 9th refused.
			want := "continuation_flood frames=11 continuations=9"
			if s := stops.get(); len(s) != 1 || s[0] != want {
				t.Fatalf("guard closes %v, want [%s]", s, want)
			}
		})
		t.Run("header block over the byte cap", func(t *testing.T) {
			h := ts.dialH2(t, https)
			// 12,000 HPACK dynamic table size updates (to 0; allowed
			// anywhere while the table is empty) decode to no field at
			// all, so net/http's header list limit never sees them; then
			// the request. 12 KB > the cap of 8,192.
			block := append(bytes.Repeat([]byte{0x20}, 12000), hpackGet(https, "h", "/big")...)
			h.write(splitBlock(1, block, 4000, 4000)...)
			if goAways := h.expectClosed(); len(goAways) != 0 {
				t.Errorf("GOAWAYs %v before the close, want none", goAways)
			}
			// HEADERS 4000 + 4000 + the rest (over 4096): the second
			// CONTINUATION's header closes.
			want := "header_block_too_large frames=4 continuations=2"
			if s := stops.get(); len(s) != 2 || s[1] != want {
				t.Fatalf("guard closes %v, want [... %s]", s, want)
			}
		})
		t.Run("header list over net/http's limit", func(t *testing.T) {
			// Fields that decode to more than the limit (4096 + 320) in a
			// block under the guard's cap (8192): net/http's own refusal
			// (GOAWAY PROTOCOL_ERROR), then the guard's close.
			h := ts.dialH2(t, https)
			var extra []string
			for i := 0; i < 7; i++ {
				extra = append(extra, fmt.Sprintf("x-%d", i), strings.Repeat("v", 1000))
			}
			// The HEADERS (5,500 bytes) is over the limit already; net/http
			// refuses the CONTINUATION that follows.
			h.write(splitBlock(1, hpackGet(https, "h", "/big", extra...), 5500)...)
			if goAways := h.expectClosed(); len(goAways) != 1 || goAways[0] != 1 {
				t.Errorf("GOAWAYs %v, want [PROTOCOL_ERROR]", goAways)
			}
		})
		st := ts.srv.Stats().HTTP2GoAways
		if st["continuation_flood"] != 1 || st["header_block_too_large"] != 1 || st["protocol_error"] != 1 {
			t.Errorf("goaways %v, want continuation_flood, header_block_too_large and protocol_error 1", st)
		}
	})
}

// TestH2RapidResetClosedAtGoAway: HEADERS + RST_STREAM pairs the guard
// does not drop (each HEADERS adds an HPACK table entry: see h2drop.go)
// with handlers that stay busy make Go's server send GOAWAY
// ENHANCE_YOUR_CALM; the guard closes the connection as soon as it is
// written, where Go would read on for a second (its goAwayTimeout).
// Counted as enhance_your_calm.
func TestH2RapidResetClosedAtGoAway(t *testing.T) {
	var mu sync.Mutex // guards release, closed and renewed after each server
	release := make(chan struct{})
	busy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		rel := release
		mu.Unlock()
		select { // a handler that outlives its stream's reset
		case <-rel:
		case <-time.After(10 * time.Second):
		}
	})
	h2Servers(t, busy, func(t *testing.T, ts *testServer, https bool, stops *guardStops) {
		t.Cleanup(func() {
			mu.Lock()
			close(release)
			release = make(chan struct{})
			mu.Unlock()
		})
		h := ts.dialH2(t, https)
		type seen struct {
			goAway, closed time.Time
			codes          []uint32
		}
		done := make(chan seen, 1)
		go func() {
			var s seen
			for {
				f, err := h.readFrame()
				if err != nil {
					s.closed = time.Now()
					done <- s
					return
				}
				if f.typ == h2FrameGoAway && len(f.payload) >= 8 {
					s.goAway = time.Now()
					s.codes = append(s.codes, binary.BigEndian.Uint32(f.payload[4:]))
				}
			}
		}()
		var s seen
		rst := make([]byte, 4)
		binary.BigEndian.PutUint32(rst, h2ErrCodeCancel)
		stream := uint32(1)
		// A literal with incremental indexing (0x40, a new name).
		indexed := append(hpackGet(https, "h", "/"), append([]byte{0x40}, append(hpackString("x-r"), hpackString("1")...)...)...)
	attack: // 20 pairs a write, at most 5,000 pairs
		for i := 0; i < 250; i++ {
			var batch [][]byte
			for j := 0; j < 20; j++ {
				batch = append(batch,
					h2Frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, stream, indexed),
					h2Frame(h2FrameRSTStream, 0, stream, rst))
				stream += 2
			}
			if err := h.write(batch...); err != nil {
				break
			}
			select {
			case s = <-done:
				break attack
			default:
			}
		}
		if s.closed.IsZero() {
			s = <-done // bounded by the connection's 10 s deadline
		}
		if len(s.codes) != 1 || s.codes[0] != h2ErrEnhanceYourCalm {
			t.Fatalf("GOAWAY codes %v, want [ENHANCE_YOUR_CALM]", s.codes)
		}
		// Go alone closes 1 s after its GOAWAY; the guard at once (the
		// margin is for a busy machine under -race).
		if d := s.closed.Sub(s.goAway); d > 800*time.Millisecond {
			t.Fatalf("closed %v after the GOAWAY, want at once", d)
		}
		t.Logf("closed %v after the GOAWAY (streams opened: %d)", s.closed.Sub(s.goAway), stream/2)
		if st := ts.srv.Stats().HTTP2GoAways; st["enhance_your_calm"] != 1 {
			t.Errorf("goaways %v, want enhance_your_calm 1", st)
		}
		if s := stops.get(); len(s) != 0 {
			t.Errorf("read-side closes %v, want none", s)
		}
		if n := ts.srv.Stats().HTTP2ResetStreamsDropped; n != 0 {
			t.Errorf("%d pairs dropped, want none", n)
		}
	})
}

// TestH2ShutdownGoAwayCounted: a normal HTTP/2 client (net/http) is served
// through the guard, and the GOAWAY NO_ERROR of a graceful shutdown is
// counted; the connection is not cut by it (NO_ERROR lets streams finish).
func TestH2ShutdownGoAwayCounted(t *testing.T) {
	h2Servers(t, echo, func(t *testing.T, ts *testServer, https bool, stops *guardStops) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
		scheme := "https"
		if !https {
			p := new(http.Protocols)
			p.SetUnencryptedHTTP2(true)
			tr.Protocols, scheme = p, "http"
		}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		for i := 0; i < 3; i++ {
			resp, err := client.Get(scheme + "://" + ts.addr + "/n")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 || !strings.HasPrefix(string(b), "GET /n") {
				t.Fatalf("%s %q", resp.Proto, b)
			}
		}
		h := ts.dialH2(t, https) // a raw client, to see the GOAWAY itself
		h.write(h2Frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, 1, hpackGet(https, "h", "/raw")))
		if status, _ := h.response(1); status != 200 {
			t.Fatalf("status %d", status)
		}
		shut := make(chan error, 1)
		go func() { shut <- ts.srv.Shutdown(t.Context()) }()
		if codes := h.expectClosed(); len(codes) != 1 || codes[0] != 0 {
			t.Errorf("GOAWAY codes %v, want [NO_ERROR]", codes)
		}
		if err := <-shut; err != nil {
			t.Fatal(err)
		}
		// The net/http client's connection and the raw one.
		if st := ts.srv.Stats().HTTP2GoAways; st["no_error"] != 2 {
			t.Errorf("goaways %v, want no_error 2", st)
		}
	})
}
