package h1server

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
)

// The HTTP/2 guard's parsers on their own (h2guard.go): a fuzz target and
// hand-made streams.

// h2ParserRun is what the guard's parsers decided over a byte stream.
type h2ParserRun struct {
	verdict     h2Verdict
	decidedAt   int64
	frames      uint64
	goAwayCodes []uint32
}

// runH2Parsers feeds stream to a read parser (with the cap maxBlock) and
// a write parser, in pieces cut where cuts says (each byte of cuts is the
// next piece's length; 0 is an empty piece; the rest of stream last).
func runH2Parsers(stream, cuts []byte, maxBlock int64) h2ParserRun {
	rp, wp := newH2ReadParser(maxBlock), h2WriteParser{}
	var codes []uint32
	done := func(code uint32) { codes = append(codes, code) }
	feed := func(b []byte) {
		rp.feed(b)
		wp.feed(b, done)
	}
	for _, c := range cuts {
		n := min(int(c), len(stream))
		feed(stream[:n])
		stream = stream[n:]
	}
	feed(stream)
	return h2ParserRun{rp.verdict, rp.decidedAt, rp.frames, codes}
}

// FuzzH2Parsers: the guard's frame-header parsers take any byte stream
// split any way without panicking, and decide the same as when fed it
// whole: the read parser's verdict, where it decided and the frames it
// counted, the write parser's GOAWAY codes. And read through a guard
// (checkGuardReads), Go gets the stream without the pairs the guard
// dropped, the same pairs however split but for a pair split exactly
// between its two frames.
func FuzzH2Parsers(f *testing.F) {
	pre := []byte(h2Preface)
	settings := h2Frame(h2FrameSettings, 0, 0, nil)
	flood := append(append(append([]byte(nil), pre...), settings...), h2Frame(h2FrameHeaders, 0, 1, []byte{0x82})...)
	for range 10 {
		flood = append(flood, h2Frame(h2FrameContinuation, 0, 1, nil)...)
	}
	valid := append(append([]byte(nil), pre...), bytes.Join(splitBlock(1, hpackGet(false, "h", "/"), 2, 2, 2), nil)...)
	goAway := h2Frame(h2FrameGoAway, 0, 0, []byte{0, 0, 0, 1, 0, 0, 0, 0xb, 'x'})
	f.Add(flood, []byte{1, 30, 9, 9, 0, 4})
	f.Add(valid, []byte{24, 9})
	f.Add(append(append([]byte(nil), pre...), goAway...), []byte{25, 3, 3, 3})
	f.Add(append(pre, bytes.Repeat([]byte{0, 0x40, 0, 1, 0, 0, 0, 0, 1}, 3)...), []byte{200})
	f.Add([]byte("PRI * HTTP/1.1"), []byte{})
	var pairs []byte
	for id := uint32(1); id < 40; id += 2 {
		pairs = append(pairs, h2Frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, id, hpackGet(true, "h", "/"))...)
		pairs = append(pairs, h2Frame(h2FrameRSTStream, 0, id, []byte{0, 0, 0, 8})...)
	}
	rr := append(append(append([]byte(nil), pre...), settings...), pairs...)
	f.Add(rr, []byte{33, 20, 13, 7, 50, 1, 200})
	f.Add(append(rr, flood[33:]...), []byte{100, 100})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		if len(stream) > 1<<16 || len(cuts) > 1<<10 {
			return
		}
		const maxBlock = 300 // small, so that fuzzed blocks reach it
		whole := runH2Parsers(stream, nil, maxBlock)
		split := runH2Parsers(stream, cuts, maxBlock)
		if whole.verdict != split.verdict || whole.decidedAt != split.decidedAt || whole.frames != split.frames {
			t.Fatalf("read parser: whole %+v, split %+v", whole, split)
		}
		if !slices.Equal(whole.goAwayCodes, split.goAwayCodes) {
			t.Fatalf("write parser: whole %v, split %v", whole.goAwayCodes, split.goAwayCodes)
		}
		if whole.verdict != h2OK && (whole.decidedAt <= 0 || whole.decidedAt > int64(len(stream))) {
			t.Fatalf("decided at %d of %d bytes", whole.decidedAt, len(stream))
		}
		checkGuardReads(t, stream, cuts, maxBlock)
	})
}

// chunkConn is a connection whose reads return stream in pieces cut where
// cuts says (each at most what the reader asks for), then io.EOF.
type chunkConn struct {
	net.Conn // nil: not used
	stream   []byte
	cuts     []byte
	off      int64
	ends     map[int64]bool // stream offsets where a read ended
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.stream) == 0 {
		return 0, io.EOF
	}
	n := len(c.stream)
	if len(c.cuts) > 0 {
		n = min(n, int(c.cuts[0]))
		c.cuts = c.cuts[1:]
	}
	n = copy(p, c.stream[:n])
	c.stream = c.stream[n:]
	c.off += int64(n)
	c.ends[c.off] = true
	return n, nil
}

func (c *chunkConn) Close() error         { return nil }
func (c *chunkConn) RemoteAddr() net.Addr { return nil }

// guardRun is what Go's server would read through a guard.
type guardRun struct {
	out    []byte  // the bytes Go read
	closed bool    // the guard closed the connection (a read verdict)
	drops  []int64 // stream offsets of the pairs dropped
	ends   map[int64]bool
}

// runGuard reads stream through an h2Guard (cap maxBlock) from a
// chunkConn, in reads of 9 bytes then of up to 100, as Go's framer does
// (a header, then a payload), until an error.
func runGuard(stream, cuts []byte, maxBlock int64, hide bool) guardRun {
	srv := &Server{maxH2Block: maxBlock, logger: slog.New(slog.DiscardHandler)}
	cc := &chunkConn{stream: stream, cuts: cuts, ends: map[int64]bool{}}
	g := srv.newH2Guard(cc, cc, hide)
	var r guardRun
	g.dp.testHookDrop = func(at int64) { r.drops = append(r.drops, at) }
	var p [100]byte
	// Each read returns a byte or more, or one of at most len(cuts) + 1
	// empty pieces, or an error: bounded.
	for i := 0; ; i++ {
		n, err := g.Read(p[:9+i%2*91])
		r.out = append(r.out, p[:n]...)
		if err != nil {
			r.closed = errors.Is(err, errH2Closed)
			break
		}
	}
	if srv.Stats().HTTP2ResetStreamsDropped != uint64(len(r.drops)) {
		panic("dropped pairs counted wrong")
	}
	r.ends = cc.ends
	return r
}

// checkGuardReads: through the guard, Go reads the stream without the
// pairs dropped (a prefix of it where the guard closes); a split stream
// drops the same pairs as one read whole, but for pairs split exactly
// between their HEADERS and RST_STREAM frames (passed: the guard does not
// wait after a HEADERS); and closes or not as the whole does.
func checkGuardReads(t *testing.T, stream, cuts []byte, maxBlock int64) {
	hide := len(cuts)%2 == 1
	runs := [2]guardRun{runGuard(stream, nil, maxBlock, hide), runGuard(stream, cuts, maxBlock, hide)}
	for i, r := range runs {
		want := withoutPairs(stream, r.drops)
		if hide {
			want = want[min(len(h2Preface), len(want)):]
		}
		if !r.closed && !bytes.Equal(r.out, want) || r.closed && !bytes.HasPrefix(want, r.out) {
			t.Fatalf("run %d (closed %v): Go read %q, want %q", i, r.closed, r.out, want)
		}
	}
	whole, split := runs[0], runs[1]
	if whole.closed != split.closed {
		t.Fatalf("closed: whole %v, split %v", whole.closed, split.closed)
	}
	if whole.closed || len(stream) > h2LookAhead {
		return // only a stream read whole (one read) drops every pair
	}
	for _, d := range split.drops {
		if !slices.Contains(whole.drops, d) {
			t.Fatalf("split dropped a pair at %d, whole did not (%v)", d, whole.drops)
		}
	}
	for _, d := range whole.drops {
		length, _, _, _ := h2FrameHead(stream[d:])
		if rst := d + h2FrameHeaderLen + int64(length); !slices.Contains(split.drops, d) && !split.ends[rst] {
			t.Fatalf("the pair at %d passed, split %v, no read ended at its RST_STREAM (%d)", d, cuts, rst)
		}
	}
}

// TestH2ReadParserDecisions: the read parser's verdicts on hand-made
// streams, where each is decided.
func TestH2ReadParserDecisions(t *testing.T) {
	pre := []byte(h2Preface)
	cont := func(n int) []byte { return h2Frame(h2FrameContinuation, 0, 1, make([]byte, n)) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(append([][]byte{pre}, parts...), nil) }
	headers := h2Frame(h2FrameHeaders, 0, 1, []byte{0x82})
	for _, c := range []struct {
		name    string
		stream  []byte
		want    h2Verdict
		decided int // bytes of stream up to the deciding frame's header end
	}{
		{"8 continuations", cat(headers, cont(0), cont(0), cont(0), cont(0), cont(0), cont(0), cont(0), cont(0)), h2OK, 0},
		{"9 continuations", cat(headers, cont(0), cont(0), cont(0), cont(0), cont(0), cont(0), cont(0), cont(0), cont(0)), h2ContinuationFlood, 24 + 10 + 9*9},
		{"END_HEADERS ends the block", cat(headers, cont(0), h2Frame(h2FrameContinuation, h2FlagEndHeaders, 1, nil),
			headers, cont(0), cont(0), cont(0), cont(0), cont(0), cont(0), cont(0), cont(0)), h2OK, 0},
		{"continuation outside a block: Go's to refuse", cat(cont(0), cont(0), cont(0), cont(0), cont(0), cont(0), cont(0), cont(0), cont(0), cont(0)), h2OK, 0},
		{"block bytes over the cap", cat(headers, cont(100), cont(100), cont(100)), h2HeaderBlockTooLarge, 24 + 10 + 3*9 + 200},
		{"one HEADERS over the cap", cat(h2Frame(h2FrameHeaders, h2FlagEndHeaders, 1, make([]byte, 301))), h2HeaderBlockTooLarge, 24 + 9},
		{"big DATA is not a header block", cat(h2Frame(h2FrameData, 0, 1, make([]byte, 5000))), h2OK, 0},
		{"bad preface", []byte("PRI * HTTP/2.0\r\n\r\nXX"), h2BadPreface, 19},
	} {
		got := runH2Parsers(c.stream, nil, 300)
		if got.verdict != c.want || (c.want != h2OK && got.decidedAt != int64(c.decided)) {
			t.Errorf("%s: %v at %d, want %v at %d", c.name, got.verdict, got.decidedAt, c.want, c.decided)
		}
	}
}
