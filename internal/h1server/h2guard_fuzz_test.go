package h1server

import (
	"bytes"
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
// counted, the write parser's GOAWAY codes.
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
	})
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
