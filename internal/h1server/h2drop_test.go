package h1server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// Tests of the guard's Rapid Reset drop (h2drop.go): raw frames over real
// sockets, h2c and TLS with ALPN h2.

const (
	h2FramePing = 0x6
	h2FlagAck   = 0x1
)

// countingHandler counts the requests it serves and answers with the path
// and the X-Idx header.
type countingHandler struct{ n atomic.Int64 }

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	fmt.Fprintf(w, "%s %s", r.URL.Path, r.Header.Get("X-Idx"))
}

// waitCount waits (at most 10 s) until c has served want requests.
func (c *countingHandler) waitCount(t *testing.T, want int64) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); c.n.Load() < want; {
		if time.Now().After(end) {
			t.Fatalf("handler ran %d times, want %d", c.n.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
	if n := c.n.Load(); n != want {
		t.Fatalf("handler ran %d times, want %d", n, want)
	}
}

func h2Ping(id uint64) []byte {
	return h2Frame(h2FramePing, 0, 0, binary.BigEndian.AppendUint64(nil, id))
}

func h2RST(stream uint32) []byte {
	return h2Frame(h2FrameRSTStream, 0, stream, []byte{0, 0, 0, h2ErrCodeCancel})
}

// awaitPing reads frames until the server's ACK of PING id: the server has
// read (and Go has processed) everything written before it. A frame on a
// stream other than those allowed fails the test.
func (h *h2Conn) awaitPing(id uint64, allowed ...uint32) {
	h.t.Helper()
	for range 1000 {
		f, err := h.readFrame()
		if err != nil {
			h.t.Fatalf("awaiting PING %d: %v", id, err)
		}
		switch {
		case f.typ == h2FramePing && f.flags&h2FlagAck != 0 && binary.BigEndian.Uint64(f.payload) == id:
			return
		case f.typ == h2FrameGoAway:
			h.t.Fatalf("GOAWAY %x", f.payload)
		case f.stream != 0:
			ok := false
			for _, s := range allowed {
				ok = ok || s == f.stream
			}
			if !ok {
				h.t.Fatalf("frame type %d on stream %d, want none", f.typ, f.stream)
			}
		}
	}
	h.t.Fatal("no PING ACK in 1000 frames")
}

// TestH2RapidResetDropped: bursts of HEADERS + RST_STREAM pairs are taken
// out by the guard: all counted, the handler never runs for them, the
// server sends nothing about their streams, and the connection then
// serves a request as usual.
func TestH2RapidResetDropped(t *testing.T) {
	ch := new(countingHandler)
	h2Servers(t, ch, func(t *testing.T, ts *testServer, https bool, stops *guardStops) {
		served := ch.n.Load()
		h := ts.dialH2(t, https)
		const batches, pairs = 20, 100
		stream := uint32(1)
		for i := range batches {
			var frames [][]byte
			for range pairs {
				frames = append(frames,
					h2Frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, stream, hpackGet(https, "h", "/rr")),
					h2RST(stream))
				stream += 2
			}
			// One write, one read by the guard; the PING's ACK says the
			// server has read it all.
			h.write(append(frames, h2Ping(uint64(i)))...)
			h.awaitPing(uint64(i))
		}
		if n := ts.srv.Stats().HTTP2ResetStreamsDropped; n != batches*pairs {
			t.Fatalf("%d pairs dropped, want %d", n, batches*pairs)
		}
		h.write(h2Frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, stream, hpackGet(https, "h", "/after")))
		if status, body := h.response(stream); status != 200 || body != "/after " {
			t.Fatalf("after the burst: %d %q", status, body)
		}
		ch.waitCount(t, served+1) // the one request, none of the dropped
		t.Logf("%d pairs dropped; the request after them served", batches*pairs)
		if s := stops.get(); len(s) != 0 {
			t.Errorf("guard closes %v, want none", s)
		}
	})
}

// TestH2ResetPairsNotDropped: pairs the guard must pass to Go are served
// by Go as before: one whose HEADERS adds an HPACK table entry (a later
// block refers to it and decodes), one with DATA between HEADERS and
// RST_STREAM, one split across reads; a droppable pair after them is
// still dropped.
func TestH2ResetPairsNotDropped(t *testing.T) {
	ch := new(countingHandler)
	h2Servers(t, ch, func(t *testing.T, ts *testServer, https bool, stops *guardStops) {
		served := ch.n.Load()
		dropped := func() uint64 { return ts.srv.Stats().HTTP2ResetStreamsDropped }
		h := ts.dialH2(t, https)

		// x-idx: v1 as a literal with incremental indexing (new name):
		// dynamic table entry 62.
		lit := append(append([]byte{0x40}, hpackString("x-idx")...), hpackString("v1")...)
		h.write(h2Frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, 1, append(hpackGet(https, "h", "/indexing"), lit...)),
			h2RST(1), h2Ping(1))
		h.awaitPing(1, 1)
		ch.waitCount(t, served+1) // Go opened the stream
		// 0xbe: indexed field 62, the entry the reset stream's block added.
		h.write(h2Frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, 3, append(hpackGet(https, "h", "/idx"), 0xbe)))
		if status, body := h.response(3); status != 200 || body != "/idx v1" {
			t.Fatalf("the block referring to the new entry: %d %q", status, body)
		}
		ch.waitCount(t, served+2)

		// HEADERS (no END_STREAM), DATA, RST_STREAM.
		h.write(h2Frame(h2FrameHeaders, h2FlagEndHeaders, 5, hpackGet(https, "h", "/data")),
			h2Frame(h2FrameData, 0, 5, []byte("abc")), h2RST(5), h2Ping(2))
		h.awaitPing(2, 5)
		ch.waitCount(t, served+3)

		// A pair split across two writes (and so two reads).
		h.write(h2Frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, 7, hpackGet(https, "h", "/split")), h2Ping(3))
		h.awaitPing(3, 7)
		h.write(h2RST(7), h2Ping(4))
		h.awaitPing(4, 7)
		ch.waitCount(t, served+4)
		if n := dropped(); n != 0 {
			t.Fatalf("%d pairs dropped, want 0", n)
		}

		// A droppable pair (padded, with priority) is still dropped.
		p := append([]byte{3, 0, 0, 0, 1, 16}, hpackGet(https, "h", "/pad")...)
		h.write(h2Frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream|h2FlagPadded|h2FlagPriority, 9, append(p, 0, 0, 0)),
			h2RST(9), h2Ping(5))
		h.awaitPing(5)
		if n := dropped(); n != 1 {
			t.Fatalf("%d pairs dropped, want 1", n)
		}
		h.write(h2Frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, 11, append(hpackGet(https, "h", "/last"), 0xbe)))
		if status, body := h.response(11); status != 200 || body != "/last v1" {
			t.Fatalf("%d %q", status, body)
		}
		ch.waitCount(t, served+5)
	})
}

// dropRun is what a dropper made of a stream: the bytes it passed and the
// stream offsets of the pairs it dropped.
type dropRun struct {
	out   []byte
	drops []int64
}

// runDropper feeds stream to a dropper (cap maxBlock) in pieces cut where
// cuts says (as runH2Parsers), holding back what it holds back as the
// guard does, the last piece final.
func runDropper(stream, cuts []byte, maxBlock int64) dropRun {
	d := newH2Dropper(maxBlock)
	var r dropRun
	d.testHookDrop = func(at int64) { r.drops = append(r.drops, at) }
	var held []byte
	feed := func(b []byte, final bool) {
		c := append(held, b...)
		ready, tail := d.scan(c, final)
		r.out = append(r.out, c[:ready]...)
		held = append([]byte(nil), c[tail:]...)
	}
	for _, c := range cuts {
		n := min(int(c), len(stream))
		feed(stream[:n], false)
		stream = stream[n:]
	}
	feed(stream, true)
	if uint64(len(r.drops)) != d.dropped || len(held) != 0 {
		panic("dropped count and drops differ, or bytes held at the end")
	}
	return r
}

// withoutPairs is stream without the pairs at the offsets drops.
func withoutPairs(stream []byte, drops []int64) []byte {
	var out []byte
	var at int64
	for _, d := range drops {
		out = append(out, stream[at:d]...)
		length, _, _, _ := h2FrameHead(stream[d:])
		at = d + h2FrameHeaderLen + int64(length) + h2FrameHeaderLen + 4
	}
	return append(out, stream[at:]...)
}

// TestH2DropperDecisions: which pairs the dropper takes out of hand-made
// streams (each after the preface and SETTINGS, fed whole).
func TestH2DropperDecisions(t *testing.T) {
	get := hpackGet(false, "h", "/")
	hd := func(stream uint32, flags byte, block []byte) []byte {
		return h2Frame(h2FrameHeaders, flags|h2FlagEndHeaders|h2FlagEndStream, stream, block)
	}
	pair := func(stream uint32, block []byte) []byte { return append(hd(stream, 0, block), h2RST(stream)...) }
	lit := func(first byte, name, value string) []byte {
		return append(append([]byte{first}, hpackString(name)...), hpackString(value)...)
	}
	cat := func(b ...[]byte) []byte { return bytes.Join(b, nil) }
	for _, c := range []struct {
		name   string
		frames []byte
		want   int
	}{
		{"pairs", cat(pair(1, get), pair(3, get), pair(5, get)), 3},
		{"literals without indexing and never indexed", pair(1, cat(get, lit(0x00, "a", "b"), lit(0x10, "c", "d"), []byte{0x0f, 0x2f}, hpackString("x"))), 1},
		{"dynamic index", pair(1, cat(get, []byte{0xbe})), 1},
		{"index past the largest table", pair(1, cat(get, []byte{0xff, hpackMaxIndex - 127 + 1})), 0},
		{"index 0", pair(1, cat(get, []byte{0x80})), 0},
		{"incremental indexing", pair(1, cat(get, lit(0x40, "a", "b"))), 0},
		{"table size update", pair(1, cat([]byte{0x20}, get)), 0},
		{"string past the end", pair(1, cat(get, []byte{0x00, 0x05, 'a'})), 0},
		{"integer past the end", pair(1, cat(get, []byte{0xff})), 0},
		{"integer too long", pair(1, cat(get, []byte{0xff, 0x80, 0x80, 0x80, 0x80, 0x01})), 0},
		{"padding", cat(hd(1, h2FlagPadded, cat([]byte{2}, get, []byte{0, 0})), h2RST(1)), 1},
		{"padding past the end", cat(hd(1, h2FlagPadded, cat([]byte{200}, get)), h2RST(1)), 0},
		{"priority", cat(hd(1, h2FlagPriority, cat([]byte{0, 0, 0, 0, 9}, get)), h2RST(1)), 1},
		{"depends on itself", cat(hd(1, h2FlagPriority, cat([]byte{0, 0, 0, 1, 9}, get)), h2RST(1)), 0},
		{"no END_HEADERS", cat(h2Frame(h2FrameHeaders, 0, 1, get), h2RST(1)), 0},
		{"even stream", pair(2, get), 0},
		{"stream not above the last", cat(hd(5, 0, get), pair(3, get), pair(5, get), pair(7, get)), 1},
		{"above a dropped one", cat(pair(5, get), pair(3, get)), 1},
		{"RST of another stream", cat(hd(1, 0, get), h2RST(3)), 0},
		{"RST of 5 bytes", cat(hd(1, 0, get), h2Frame(h2FrameRSTStream, 0, 1, []byte{0, 0, 0, 8, 0})), 0},
		{"a frame between", cat(hd(1, 0, get), h2Ping(1), h2RST(1)), 0},
		{"in an open block", cat(h2Frame(h2FrameHeaders, 0, 1, get), pair(3, get)), 0},
		{"after the block ends", cat(h2Frame(h2FrameHeaders, 0, 1, get), h2Frame(h2FrameContinuation, h2FlagEndHeaders, 1, nil), pair(3, get)), 1},
		{"over the block cap", pair(1, cat(get, lit(0x00, "a", string(make([]byte, 300))))), 0},
	} {
		stream := cat([]byte(h2Preface), h2Frame(h2FrameSettings, 0, 0, nil), c.frames)
		if r := runDropper(stream, nil, 300); len(r.drops) != c.want {
			t.Errorf("%s: %d dropped, want %d", c.name, len(r.drops), c.want)
		}
	}
	// Split anywhere in the pair, it is held back and dropped; split
	// between its frames, it passes.
	start := cat([]byte(h2Preface), h2Frame(h2FrameSettings, 0, 0, nil))
	for k := 0; k < len(pair(1, get)); k++ {
		r := runDropper(cat(start, pair(1, get)), []byte{byte(len(start)), byte(k)}, 300)
		if want := 1 - b2i(k == len(hd(1, 0, get))); len(r.drops) != want {
			t.Errorf("a pair split %d bytes in: %d dropped, want %d", k, len(r.drops), want)
		}
	}
	// Before SETTINGS (the client's first frame must be one).
	if r := runDropper(append([]byte(h2Preface), pair(1, get)...), nil, 300); len(r.drops) != 0 {
		t.Errorf("a pair as the first frame: %d dropped, want 0", len(r.drops))
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestH2ResetOnlyConnectionIdles: a connection that only opens and
// cancels streams (all dropped) has no stream open to Go's server, so its
// idle timeout runs: GOAWAY NO_ERROR, then the close.
func TestH2ResetOnlyConnectionIdles(t *testing.T) {
	const idle = 300 * time.Millisecond
	ch := new(countingHandler)
	ts := startServer(t, ch, func(o *Options) { o.Fallback.IdleTimeout = idle })
	h := ts.dialH2(t, false)
	type result struct {
		goAways []uint32
		err     error
	}
	done := make(chan result, 1)
	go func() {
		g, err := h.untilClosed()
		done <- result{g, err}
	}()
	start := time.Now()
	stream := uint32(1)
	var res *result
	// A batch of 10 pairs every 10 ms until the close, at most 1,000
	// batches (the connection's 10 s deadline ends the reader before).
	for i := 0; i < 1000 && res == nil; i++ {
		var frames [][]byte
		for range 10 {
			frames = append(frames, h2Frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, stream, hpackGet(false, "h", "/")), h2RST(stream))
			stream += 2
		}
		if h.write(frames...) != nil {
			break
		}
		select {
		case r := <-done:
			res = &r
		case <-time.After(10 * time.Millisecond): // the attacker's pace
		}
	}
	if res == nil {
		r := <-done // bounded by the connection's 10 s deadline
		res = &r
	}
	took := time.Since(start)
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(res.goAways) != 1 || res.goAways[0] != 0 {
		t.Fatalf("GOAWAYs %v, want [NO_ERROR]", res.goAways)
	}
	if took < idle {
		t.Fatalf("closed after %v, before the idle timeout", took)
	}
	if n := ch.n.Load(); n != 0 {
		t.Fatalf("handler ran %d times", n)
	}
	t.Logf("closed %v after the first of %d pairs (%d dropped)", took.Round(time.Millisecond), stream/2, ts.srv.Stats().HTTP2ResetStreamsDropped)
}
