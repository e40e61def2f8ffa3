package h1server

import "sync"

// Rapid Reset, dropped before Go sees it (issue 22): the guard reads a
// client's bytes into a look-ahead buffer (h2ReadBuf, up to
// h2LookAhead bytes a read) and, before Go's server reads them, takes out
// every HEADERS + RST_STREAM pair of a stream the client opens and
// cancels at once. Go's server then never opens the stream: no stream
// state, no handler goroutine, no request to the upstream. A pair costs
// the guard a scan of its 50-odd bytes; through Go it cost about 2 us.
//
// A pair is dropped only when Go would have opened the stream and the
// client's reset would have cancelled it, with nothing else changed, so
// the client sees what it would see had levee started the request and
// cancelled it (a cancelled stream is answered by nothing). Each condition,
// and why:
//
//   - The HEADERS frame has END_HEADERS, and no header block is open: a
//     block continued by CONTINUATION frames is state Go must see whole
//     (and a HEADERS inside an open block is Go's PROTOCOL_ERROR to send).
//   - It opens a new client stream: an odd stream ID greater than that of
//     every HEADERS seen on the connection (dropped or passed). A HEADERS
//     on a stream already open carries trailers (or is an error) for a
//     stream Go knows; an ID not above the last is Go's PROTOCOL_ERROR;
//     an even one too. And not before the client's first frame (which
//     must be SETTINGS: Go's PROTOCOL_ERROR otherwise).
//   - Its header block fragment leaves the HPACK decoder's state as it
//     was (RFC 7541 section 6): only indexed fields (1xxxxxxx) and
//     literals without indexing or never indexed (0000xxxx, 0001xxxx).
//     A literal with incremental indexing (01xxxxxx) or a dynamic table
//     size update (001xxxxx) changes the table later blocks refer to, so
//     Go must decode it. A block that does not parse (an integer or a
//     string past the fragment's end, index 0, an index past the static
//     table plus the most entries a 4,096-byte dynamic table can hold)
//     is Go's COMPRESSION_ERROR to send: not dropped. Padding (its length
//     within the frame) and the PRIORITY fields (not a dependency on the
//     stream itself, Go's PROTOCOL_ERROR) are skipped to find the
//     fragment. Huffman-coded strings are not decoded: one that would not
//     decode, in a dropped pair, goes unnoticed (Go would have closed the
//     connection with COMPRESSION_ERROR).
//   - The frame's payload is at most the guard's header block cap (a
//     bigger one closes the connection, h2guard.go).
//   - It is IMMEDIATELY followed, within the same read, by an RST_STREAM
//     frame (payload of 4 bytes, Go's FRAME_SIZE_ERROR otherwise) on the
//     same stream. A frame between them may concern the stream (DATA,
//     WINDOW_UPDATE) or the connection, and a pair split across reads
//     has had its HEADERS passed already: both pass to Go as they are.
//     The attacker's pairs arrive back to back in full reads; a pair
//     straddling two reads (about one in 400 at 36 bytes a pair and 16
//     KiB reads) is served by Go as before.
//
// What differs from Go's own handling, all for clients that break RFC
// 9113: a frame other than PRIORITY on a dropped stream before any later
// stream is opened is, to Go, a frame on an idle stream (PROTOCOL_ERROR)
// where it would have been one on a closed stream; a HEADERS reusing an
// ID at or below a dropped one is opened by Go where it would have been
// refused. Go's idle timeout keeps running through dropped pairs (it
// stops only for streams Go opens), so a connection that only opens and
// cancels streams is closed as idle.

// h2LookAhead is the most bytes the guard reads from the connection at
// once: its buffer's size (one TLS record's plaintext).
const h2LookAhead = 16 << 10

// HTTP/2 frame types and flags the dropper reads besides h2guard.go's.
const (
	h2FrameRSTStream = 0x3
	h2FrameSettings  = 0x4
	h2FlagPadded     = 0x8
	h2FlagPriority   = 0x20
)

// hpackMaxIndex is the largest HPACK index a block can validly use on
// Go's server: the 61 static entries and at most 4,096 / 32 = 128 dynamic
// ones (Go's server keeps the default table size of 4,096 bytes; an entry
// takes at least 32).
const hpackMaxIndex = 61 + 4096/32

// h2Dropper finds HEADERS + RST_STREAM pairs to drop in the bytes a client
// sends (see above). Not safe for concurrent use.
type h2Dropper struct {
	prefaceLeft int // preface bytes still to pass
	hdr         [h2FrameHeaderLen]byte
	nhdr        int    // bytes of a frame header split across reads
	remain      uint32 // payload bytes of the current frame still to pass
	frames      uint64 // frames seen (passed or dropped)
	settings    bool   // the first frame was SETTINGS
	inBlock     bool   // a header block is open
	maxStream   uint32 // the highest stream ID of a HEADERS seen
	maxBlock    int64  // the guard's header block cap
	dropped     uint64 // pairs dropped
	offset      int64  // bytes scanned before the current read's
	// testHookDrop, when set (by tests), is told the stream offset of
	// each pair dropped.
	testHookDrop func(offset int64)
}

func newH2Dropper(maxBlock int64) h2Dropper {
	return h2Dropper{prefaceLeft: len(h2Preface), maxBlock: maxBlock}
}

// scan takes the pairs to drop out of c in place: c is what the guard has
// read and not yet scanned (a tail held from the last scan, then the
// bytes of a read). It returns ready, the length of what Go is to read
// (moved to c[:ready]), and tail, where the bytes it holds back start
// (c[tail:], to be scanned again with the next read's bytes before them
// pass; ready <= tail). It holds back only what may be the start of a
// pair to drop (see h2Dropper.at), never with final set (the connection's
// reads have ended: everything passes). The bytes are seen once each
// (held ones only when they pass or are dropped), in order.
func (d *h2Dropper) scan(c []byte, final bool) (ready, tail int) {
	out, i := 0, 0
	keep := func(n int) {
		copy(c[out:], c[i:i+n])
		out += n
		i += n
	}
	// Each pass consumes at least one byte of c or returns: bounded by
	// len(c).
	for i < len(c) {
		switch {
		case d.prefaceLeft > 0:
			n := min(d.prefaceLeft, len(c)-i)
			d.prefaceLeft -= n
			keep(n)
		case d.remain > 0:
			n := int(min(d.remain, uint32(len(c)-i)))
			d.remain -= uint32(n)
			keep(n)
		case d.nhdr > 0:
			// A frame header split by the end of the reads (final).
			n := copy(d.hdr[d.nhdr:], c[i:])
			d.nhdr += n
			keep(n)
			if d.nhdr == h2FrameHeaderLen {
				d.nhdr = 0
				d.frame(d.hdr[:])
			}
		default:
			n, hold := d.at(c[i:])
			switch {
			case hold && !final:
				d.offset += int64(i)
				return out, i
			case n > 0:
				d.dropped++
				if d.testHookDrop != nil {
					d.testHookDrop(d.offset + int64(i))
				}
				i += n
			case len(c)-i < h2FrameHeaderLen: // final
				d.nhdr = copy(d.hdr[:], c[i:])
				keep(d.nhdr)
			default:
				d.frame(c[i : i+h2FrameHeaderLen])
				keep(h2FrameHeaderLen)
			}
		}
	}
	d.offset += int64(i)
	return out, i
}

// frame follows a frame header that passes.
func (d *h2Dropper) frame(h []byte) {
	length, typ, flags, stream := h2FrameHead(h)
	d.remain = length
	if d.frames == 0 {
		d.settings = typ == h2FrameSettings
	}
	d.frames++
	switch typ {
	case h2FrameHeaders, h2FramePushPromise:
		d.inBlock = flags&h2FlagEndHeaders == 0
	case h2FrameContinuation:
		if d.inBlock {
			d.inBlock = flags&h2FlagEndHeaders == 0
		}
	default:
		d.inBlock = false
	}
	if typ == h2FrameHeaders {
		d.maxStream = max(d.maxStream, stream)
	}
}

// at looks at b, which starts at a frame boundary. n > 0: b starts with a
// HEADERS + RST_STREAM pair to drop, n bytes long. hold: b may start with
// such a pair but ends before it does, so the bytes are to be held until
// more arrive (the whole pair fits the guard's buffer): a frame header cut
// short, a HEADERS frame that may open a pair cut short, or such a HEADERS
// whole followed by a frame cut short that may be its RST_STREAM. Holding
// delays nothing Go could act on (it acts on whole frames), except in the
// last case, where the HEADERS waits for the rest of the frame after it
// (at most 12 bytes). A droppable HEADERS with nothing after it in b
// passes at once: a pair split there is served by Go.
func (d *h2Dropper) at(b []byte) (n int, hold bool) {
	if len(b) < h2FrameHeaderLen {
		return 0, true
	}
	length, typ, flags, stream := h2FrameHead(b)
	if typ != h2FrameHeaders || flags&h2FlagEndHeaders == 0 || d.inBlock || !d.settings ||
		stream%2 != 1 || stream <= d.maxStream || int64(length) > d.maxBlock ||
		2*h2FrameHeaderLen+int(length)+4 > h2LookAhead {
		return 0, false
	}
	end := h2FrameHeaderLen + int(length)
	if len(b) < end {
		return 0, true
	}
	frag, ok := headersFragment(b[h2FrameHeaderLen:end], flags, stream)
	if !ok || !hpackStateless(frag) {
		return 0, false
	}
	// The RST_STREAM header expected after it, but for its flags (none
	// defined: any value), then its 4 bytes of error code.
	rst := [h2FrameHeaderLen]byte{0, 0, 4, h2FrameRSTStream, 0, byte(stream >> 24), byte(stream >> 16), byte(stream >> 8), byte(stream)}
	next := b[end:]
	if len(next) == 0 {
		return 0, false
	}
	for k := range min(len(next), h2FrameHeaderLen) {
		if k != 4 && next[k] != rst[k] {
			return 0, false
		}
	}
	if len(next) < h2FrameHeaderLen+4 {
		return 0, true
	}
	d.frames += 2
	d.maxStream = stream
	return end + h2FrameHeaderLen + 4, false
}

// h2FrameHead reads a frame header (at least 9 bytes).
func h2FrameHead(h []byte) (length uint32, typ, flags byte, stream uint32) {
	length = uint32(h[0])<<16 | uint32(h[1])<<8 | uint32(h[2])
	stream = (uint32(h[5])<<24 | uint32(h[6])<<16 | uint32(h[7])<<8 | uint32(h[8])) & 0x7fffffff
	return length, h[3], h[4], stream
}

// headersFragment is the header block fragment of a HEADERS frame's
// payload p (RFC 9113 section 6.2), without padding and priority fields;
// false if they do not fit or the stream depends on itself.
func headersFragment(p []byte, flags byte, stream uint32) ([]byte, bool) {
	pad := 0
	if flags&h2FlagPadded != 0 {
		if len(p) < 1 {
			return nil, false
		}
		pad, p = int(p[0]), p[1:]
	}
	if flags&h2FlagPriority != 0 {
		if len(p) < 5 {
			return nil, false
		}
		dep := (uint32(p[0])<<24 | uint32(p[1])<<16 | uint32(p[2])<<8 | uint32(p[3])) & 0x7fffffff
		if dep == stream {
			return nil, false
		}
		p = p[5:]
	}
	if pad > len(p) {
		return nil, false
	}
	return p[:len(p)-pad], true
}

// hpackStateless reports whether the header block fragment b parses as
// HPACK representations that leave the decoder's dynamic table as it was
// (see above).
func hpackStateless(b []byte) bool {
	// Each pass consumes at least one byte of b: bounded by len(b).
	for len(b) > 0 {
		var idx uint32
		var ok bool
		switch c := b[0]; {
		case c&0x80 != 0: // indexed field
			if idx, b, ok = hpackInteger(b, 7); !ok || idx == 0 || idx > hpackMaxIndex {
				return false
			}
		case c&0xc0 == 0x40, c&0xe0 == 0x20: // incremental indexing, size update
			return false
		default: // literal without indexing or never indexed
			if idx, b, ok = hpackInteger(b, 4); !ok || idx > hpackMaxIndex {
				return false
			}
			if idx == 0 { // a literal name
				if b, ok = hpackSkipString(b); !ok {
					return false
				}
			}
			if b, ok = hpackSkipString(b); !ok {
				return false
			}
		}
	}
	return true
}

// hpackInteger reads an HPACK integer with an n-bit prefix at the start of
// b (RFC 7541 section 5.1) and returns it and the rest of b; false if it
// runs past b or takes more than 4 continuation bytes (over 2^28, more
// than any valid index or string in a block the guard's cap allows).
func hpackInteger(b []byte, n uint) (uint32, []byte, bool) {
	mask := byte(1)<<n - 1
	v := uint32(b[0] & mask)
	if v < uint32(mask) {
		return v, b[1:], true
	}
	for k := 1; k <= 4 && k < len(b); k++ {
		v += uint32(b[k]&0x7f) << (7 * (k - 1))
		if b[k]&0x80 == 0 {
			return v, b[k+1:], true
		}
	}
	return 0, nil, false
}

// hpackSkipString skips a string literal (Huffman-coded or not) at the
// start of b; false if b is empty or the string runs past b.
func hpackSkipString(b []byte) ([]byte, bool) {
	if len(b) == 0 {
		return nil, false
	}
	n, rest, ok := hpackInteger(b, 7)
	if !ok || uint64(n) > uint64(len(rest)) {
		return nil, false
	}
	return rest[n:], true
}

// h2ReadBufs pools the guard's look-ahead buffers (a buffer is taken by a
// connection's first read and given back when the connection's reads end).
var h2ReadBufs = sync.Pool{New: func() any { return new([h2LookAhead]byte) }}
