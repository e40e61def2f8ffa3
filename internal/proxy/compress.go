package proxy

// Compressing an answer (a route's `compression`): the encoding is chosen
// from the request's Accept-Encoding (RFC 9110 section 12.5.3), the answer
// is eligible by its status, headers, media type and length, and the body
// goes through a pooled encoder that wraps the ResponseWriter. Each flush
// of the answer (a streamed answer is flushed after every write: see
// sender) flushes the encoder first, so a streamed NDJSON answer reaches
// the client compressed chunk by chunk. Levee's own refusals never come
// through here: they are written by refuse, not respond.

import (
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/net/http/httpguts"
)

// Encoding is a content coding levee can apply.
type Encoding uint8

// The codings, by their Accept-Encoding token.
const (
	EncodingNone   Encoding = iota
	EncodingZstd            // "zstd"
	EncodingBrotli          // "br"
	EncodingGzip            // "gzip"
	numEncodings
)

// String returns the coding's token.
func (e Encoding) String() string {
	switch e {
	case EncodingZstd:
		return "zstd"
	case EncodingBrotli:
		return "br"
	case EncodingGzip:
		return "gzip"
	}
	return "identity"
}

// ParseEncoding maps a token (lower case) to its Encoding; EncodingNone when
// levee does not apply it.
func ParseEncoding(s string) Encoding {
	switch s {
	case "zstd":
		return EncodingZstd
	case "br":
		return EncodingBrotli
	case "gzip":
		return EncodingGzip
	}
	return EncodingNone
}

// CompressLevel bounds the CPU an encoder spends per byte.
type CompressLevel uint8

// The levels: fast (the default) is gzip 1, zstd fastest, brotli 1;
// default is gzip 5, zstd default, brotli 4; best is gzip 9, zstd
// better-compression, brotli 7 (still far from the codings' slowest).
const (
	LevelFast CompressLevel = iota
	LevelDefault
	LevelBest
	numLevels
)

// Compression is a route's compression policy. Immutable once in a Table.
type Compression struct {
	// Types are the media types compressed: "type/subtype" or "type/*",
	// lower case.
	Types []string
	// MinBytes: an answer of known length below it is sent as is (one of
	// unknown length is compressed).
	MinBytes int64
	// Level bounds the encoders' CPU.
	Level CompressLevel
	// Encodings are the codings offered, in levee's order of preference
	// (which breaks ties between equal q-values).
	Encodings []Encoding
}

// Bounds of the Accept-Encoding parser: a header (all its lines) longer,
// or with more elements, is not read at all (the answer is not
// compressed).
const (
	maxAcceptEncodingBytes = 1024
	maxAcceptEncodingItems = 32
)

// acceptQ holds, per coding, the q-value (in thousandths) the client gave,
// or -1 when the coding was not named.
type acceptQ struct {
	q        [numEncodings]int16 // index EncodingNone: identity
	star     int16
	anyNamed bool
}

// parseAcceptEncoding reads the Accept-Encoding field lines. ok is false
// when the field is malformed or over the bounds: the caller then sends
// the answer as is (identity is always acceptable to a client that said
// nothing valid). No allocation.
func parseAcceptEncoding(lines []string) (a acceptQ, ok bool) {
	for i := range a.q {
		a.q[i] = -1
	}
	a.star = -1
	total, items := 0, 0
	for _, line := range lines {
		total += len(line)
		if total > maxAcceptEncodingBytes {
			return a, false
		}
		rest := line
		for rest != "" { // bounded: at most maxAcceptEncodingItems elements
			var elem string
			elem, rest, _ = strings.Cut(rest, ",")
			elem = trimOWS(elem)
			if elem == "" {
				continue // RFC 9110 section 5.6.1: empty list elements are ignored
			}
			if items++; items > maxAcceptEncodingItems {
				return a, false
			}
			coding, params, hasParams := strings.Cut(elem, ";")
			coding = trimOWS(coding)
			if !httpguts.ValidHeaderFieldName(coding) { // an RFC 9110 token
				return a, false
			}
			q := int16(1000)
			if hasParams {
				params = trimOWS(params)
				if len(params) < 2 || (params[0] != 'q' && params[0] != 'Q') || params[1] != '=' {
					return a, false // the only parameter of Accept-Encoding is the weight
				}
				var qok bool
				if q, qok = parseQValue(params[2:]); !qok {
					return a, false
				}
			}
			a.anyNamed = true
			switch {
			case coding == "*":
				if a.star < 0 {
					a.star = q
				}
			case strings.EqualFold(coding, "identity"):
				if a.q[EncodingNone] < 0 {
					a.q[EncodingNone] = q
				}
			default:
				if e := parseEncodingFold(coding); e != EncodingNone && a.q[e] < 0 {
					a.q[e] = q
				}
			}
		}
	}
	return a, true
}

// parseEncodingFold is ParseEncoding, any case, without allocating.
func parseEncodingFold(s string) Encoding {
	for e := EncodingZstd; e < numEncodings; e++ {
		if strings.EqualFold(s, e.String()) {
			return e
		}
	}
	return EncodingNone
}

// parseQValue parses RFC 9110's qvalue ("0" ["." 0*3DIGIT] / "1" ["."
// 0*3("0")]) into thousandths.
func parseQValue(s string) (int16, bool) {
	if s == "" || len(s) > 5 || (s[0] != '0' && s[0] != '1') {
		return 0, false
	}
	v := int16(s[0]-'0') * 1000
	if len(s) == 1 {
		return v, true
	}
	if s[1] != '.' {
		return 0, false
	}
	scale := int16(100)
	for i := 2; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v += int16(c-'0') * scale
		scale /= 10
	}
	if v > 1000 {
		return 0, false // 1.001 and above
	}
	return v, true
}

// negotiate picks the coding for an answer from the client's
// Accept-Encoding among offered (levee's order of preference):
// the acceptable coding (q > 0, named or covered by "*") with the highest
// q, ties going to the earlier in offered; EncodingNone when there is none
// or when identity is preferred to it (a higher q). A request without
// Accept-Encoding, or with a malformed one, gets EncodingNone.
func negotiate(lines []string, offered []Encoding) Encoding {
	if len(lines) == 0 {
		return EncodingNone
	}
	a, ok := parseAcceptEncoding(lines)
	if !ok || !a.anyNamed {
		return EncodingNone
	}
	best, bestQ := EncodingNone, int16(0)
	for _, e := range offered {
		q := a.q[e]
		if q < 0 {
			q = a.star // not named: "*" decides, and without "*" it is not acceptable
		}
		if q > bestQ {
			best, bestQ = e, q
		}
	}
	if best == EncodingNone {
		return EncodingNone
	}
	// identity is always acceptable (levee never answers 406), but the
	// client prefers it only when it names it with a higher q than the
	// best coding's: "gzip;q=0.5" alone asks for gzip.
	if a.q[EncodingNone] > bestQ {
		return EncodingNone
	}
	return best
}

// compressible reports whether the answer may be compressed at all (the
// client's Accept-Encoding aside): its status and method carry a body,
// it is not already encoded, not a range, not marked no-transform, of a
// listed media type and, when its length is known, not below MinBytes.
func (c *Compression) compressible(method string, status int, h http.Header, contentLength int64) bool {
	switch {
	case method == http.MethodHead, status < 200, status == http.StatusNoContent,
		status == http.StatusNotModified, status == http.StatusPartialContent:
		return false
	case contentLength >= 0 && contentLength < c.MinBytes, contentLength == 0:
		return false
	case len(h["Content-Encoding"]) > 0, len(h["Content-Range"]) > 0:
		return false
	case hasToken(h["Cache-Control"], "no-transform"):
		return false
	}
	ct := h["Content-Type"]
	if len(ct) == 0 {
		return false
	}
	return c.typeListed(ct[0])
}

// typeListed reports whether the media type of a Content-Type value is
// one of c.Types (exact, or its "type/*"), any case.
func (c *Compression) typeListed(v string) bool {
	mt, _, _ := strings.Cut(v, ";")
	mt = trimOWS(mt)
	slash := strings.IndexByte(mt, '/')
	if slash <= 0 {
		return false
	}
	for _, t := range c.Types {
		if strings.HasSuffix(t, "/*") {
			if len(t)-1 == slash+1 && strings.EqualFold(t[:slash], mt[:slash]) {
				return true
			}
		} else if strings.EqualFold(t, mt) {
			return true
		}
	}
	return false
}

// hasToken reports whether a comma-separated field lists tok (any case,
// ignoring parameters such as max-age's value).
func hasToken(lines []string, tok string) bool {
	for _, line := range lines {
		rest := line
		for n := 0; rest != "" && n < 64; n++ { // bounded: 64 elements a line
			var elem string
			elem, rest, _ = strings.Cut(rest, ",")
			name, _, _ := strings.Cut(trimOWS(elem), "=")
			if strings.EqualFold(trimOWS(name), tok) {
				return true
			}
		}
	}
	return false
}

// addVary adds name to the answer's Vary unless it is there (or Vary is
// "*"): Accept-Encoding here, Origin for a cors route (cors.go). The one
// Vary writer, so the two never list a name twice.
func addVary(h http.Header, name string) {
	for _, line := range h["Vary"] {
		rest := line
		for n := 0; rest != "" && n < 64; n++ { // bounded: 64 elements a line
			var elem string
			elem, rest, _ = strings.Cut(rest, ",")
			if e := trimOWS(elem); e == "*" || strings.EqualFold(e, name) {
				return
			}
		}
	}
	h["Vary"] = append(h["Vary"][:len(h["Vary"]):len(h["Vary"])], name)
}

// startCompression decides whether the answer about to be written with
// status and the headers in w.Header() is compressed; when it is, it
// rewrites the headers (Content-Encoding set, Content-Length and
// Accept-Ranges removed, a strong ETag weakened) and returns the writer
// the body goes through, which the caller must end (endCoding). It returns nil
// when the answer is sent as is (then Vary is still set when the answer
// was eligible, for caches). The memory of the encoder is reserved from
// the budget: without room the answer goes uncompressed.
func (o *responder) startCompression(w http.ResponseWriter, r *http.Request, x *exchange, status int, contentLength int64) *compressWriter {
	c := x.route.Compression
	h := w.Header()
	if c == nil || !c.compressible(r.Method, status, h, contentLength) {
		return nil
	}
	addVary(h, "Accept-Encoding")
	e := negotiate(r.Header["Accept-Encoding"], c.Encodings)
	if e == EncodingNone || !o.memory.reserve(x, encoderMemory[e][c.Level]) {
		return nil
	}
	h["Content-Encoding"] = []string{e.String()}
	delete(h, "Content-Length")
	delete(h, "Accept-Ranges") // ranges of the coded answer are not offered
	if et := h["Etag"]; len(et) > 0 && !strings.HasPrefix(et[0], "W/") {
		// The coded bytes differ from the upstream's representation: a
		// strong validator would claim byte equality (RFC 9110 8.8.1).
		h["Etag"] = []string{"W/" + et[0]}
	}
	return getCompressWriter(w, e, c.Level)
}

// compressWriter is the ResponseWriter an answer's body is compressed
// through. Write compresses; FlushError flushes the encoder, then the
// connection (a streamed answer is flushed after every write); endCoding
// ends the coded stream. Unwrap lets the sender find the write deadline.
type compressWriter struct {
	http.ResponseWriter
	out   countingWriter // the encoder's destination: the client
	enc   encoder
	e     Encoding
	level CompressLevel
	flush flushErrorer // nil: the writer below cannot flush
	err   error        // the first error of the encoder
}

// countingWriter counts the coded bytes written to the client.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// encoder is what the three codings' writers have in common.
type encoder interface {
	io.WriteCloser
	Flush() error
	Reset(io.Writer)
}

func (cw *compressWriter) Write(p []byte) (int, error) {
	if cw.err != nil {
		return 0, cw.err
	}
	n, err := cw.enc.Write(p)
	if err != nil {
		cw.err = err
	}
	return n, err
}

// FlushError flushes what the encoder holds, then the connection.
func (cw *compressWriter) FlushError() error {
	if cw.err != nil {
		return cw.err
	}
	if err := cw.enc.Flush(); err != nil {
		cw.err = err
		return err
	}
	if cw.flush != nil {
		return cw.flush.FlushError()
	}
	return nil
}

// Unwrap returns the writer below (http.ResponseController, writerAs).
func (cw *compressWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }

// endCoding ends the coded stream (its last block and checksum) when ok,
// and gives the encoder back to its pool either way.
func (cw *compressWriter) endCoding(ok bool) error {
	if cw.enc == nil {
		return nil // finished already
	}
	var err error
	if ok && cw.err == nil {
		err = cw.enc.Close()
	}
	cw.enc.Reset(io.Discard) // drops the reference to the client's writer
	putEncoder(cw.e, cw.level, cw.enc)
	cw.enc, cw.ResponseWriter, cw.out.w, cw.flush = nil, nil, nil, nil
	return err
}

// Encoder pools: one per coding and level, each keeping at most
// maxIdleEncoders idle encoders (a channel, so the bound holds; the rest
// are left to the collector). Encoders in use are bounded by requests in
// flight, and each one's memory is reserved from the memory budget
// (encoderMemory) while it is in use.
const maxIdleEncoders = 8

// encoderWindow bounds the zstd window (and so its decoder's memory and
// its encoder's history) to 64 KiB; brotli's window is 2^encoderLGWin.
const (
	encoderWindow = 64 << 10
	encoderLGWin  = 16
)

// encoderMemory is an upper estimate of an encoder's memory in use, per
// coding and level, reserved from the memory budget while it codes an
// answer (measured by TestEncoderMemory on a 64 KiB answer, about 25 %
// added: zstd 0.6, 1.7 and 4.6 MiB; brotli 1.0, 1.7 and 1.7 MiB; gzip
// 0.8, 1.1 and 1.4 MiB).
var encoderMemory = [numEncodings][numLevels]int64{
	EncodingZstd:   {1 << 20, 2<<20 + 512<<10, 6 << 20},
	EncodingBrotli: {1<<20 + 512<<10, 2<<20 + 512<<10, 2<<20 + 512<<10},
	EncodingGzip:   {1 << 20, 1<<20 + 512<<10, 2 << 20},
}

var encoderPools [numEncodings][numLevels]chan encoder

func init() {
	for e := range encoderPools {
		for l := range encoderPools[e] {
			encoderPools[e][l] = make(chan encoder, maxIdleEncoders)
		}
	}
}

func getCompressWriter(w http.ResponseWriter, e Encoding, level CompressLevel) *compressWriter {
	cw := &compressWriter{ResponseWriter: w, out: countingWriter{w: w}, e: e, level: level}
	select {
	case cw.enc = <-encoderPools[e][level]:
		cw.enc.Reset(&cw.out)
	default:
		cw.enc = newEncoder(e, level, &cw.out)
	}
	switch f := w.(type) {
	case flushErrorer:
		cw.flush = f
	case http.Flusher:
		cw.flush = plainFlusher{f}
	}
	return cw
}

func putEncoder(e Encoding, level CompressLevel, enc encoder) {
	select {
	case encoderPools[e][level] <- enc:
	default: // the pool is full: left to the collector
	}
}

// newEncoder makes an encoder of coding e at level writing to w.
func newEncoder(e Encoding, level CompressLevel, w io.Writer) encoder {
	switch e {
	case EncodingZstd:
		speed := [numLevels]zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression}[level]
		enc, err := zstd.NewWriter(w, zstd.WithEncoderLevel(speed), zstd.WithWindowSize(encoderWindow),
			zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic("zstd encoder options: " + err.Error()) // fixed options: a bug
		}
		return enc
	case EncodingBrotli:
		q := [numLevels]int{1, 4, 7}[level]
		return brotli.NewWriterOptions(w, brotli.WriterOptions{Quality: q, LGWin: encoderLGWin})
	default:
		l := [numLevels]int{gzip.BestSpeed, 5, gzip.BestCompression}[level]
		enc, err := gzip.NewWriterLevel(w, l)
		if err != nil {
			panic("gzip level: " + err.Error()) // fixed levels: a bug
		}
		return enc
	}
}

// compressed counts an answer compressed by cw from in body bytes.
func (rm *routeMetrics) compressed(in int64, cw *compressWriter) {
	if rm == nil || rm.m == nil {
		return
	}
	rm.m.compressed.WithLabelValues(rm.route, cw.e.String()).Inc()
	rm.m.compressedIn.WithLabelValues(rm.route).Add(float64(in))
}
