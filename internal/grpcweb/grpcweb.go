// Package grpcweb translates gRPC-Web (a browser's fetch of a gRPC method,
// https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-WEB.md) to gRPC
// and back: the request's content type becomes application/grpc (its
// -text body base64-decoded as it streams), and the upstream's answer
// goes back as gRPC-Web, its trailers (or a trailers-only answer's status)
// written at the end of the body as a trailer frame: flag 0x80, a 4-byte
// length, "key: value\r\n" lines. Every buffer is bounded. It imports
// nothing of levee: the proxy wraps its request path with it.
package grpcweb

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
)

// Bounds.
const (
	// MaxTrailerFrame bounds the trailer frame levee writes and the one
	// ReadFrame accepts (its payload): an upstream's trailers beyond it
	// are replaced by grpc-status 13 (INTERNAL).
	MaxTrailerFrame = 16 << 10
	// maxTrailerFields bounds the trailer fields written or parsed.
	maxTrailerFields = 64
	// textChunk is the most base64 text the request decoder reads at once
	// (a multiple of 4), and the most the response encoder writes at once.
	textChunk = 4 << 10
)

// Content types.
const (
	ctGRPC    = "application/grpc"
	ctWeb     = "application/grpc-web"
	ctWebText = "application/grpc-web-text"
)

// Kind says what a request's Content-Type is: not gRPC-Web (ok false),
// binary gRPC-Web (application/grpc-web, +proto or another +codec), or the
// base64 text variant (application/grpc-web-text[+codec]). codec is the
// "+codec" suffix, possibly empty. No allocation.
func Kind(ct string) (text bool, codec string, ok bool) {
	rest, found := strings.CutPrefix(ct, ctWeb)
	if !found {
		return false, "", false
	}
	if r, t := strings.CutPrefix(rest, "-text"); t {
		rest, text = r, true
	}
	if i := strings.IndexByte(rest, ';'); i >= 0 {
		rest = rest[:i]
	}
	if rest != "" && (rest[0] != '+' || len(rest) == 1) {
		return false, "", false
	}
	return text, rest, true
}

// Writer is the client's ResponseWriter during a gRPC-Web request: the
// proxy writes the upstream's gRPC answer to it, and it writes gRPC-Web.
// An answer that is not gRPC (a refusal as JSON) passes through as is.
type Writer struct {
	w     http.ResponseWriter
	h     http.Header // what the proxy writes; copied to w's at WriteHeader
	text  bool
	codec string

	wroteHeader bool
	translate   bool     // the answer is gRPC: translated
	announced   []string // the Trailer header the proxy set
	only        http.Header
	pending     [3]byte // text: bytes not yet encoded (fewer than 3 between calls)
	npending    int
	scratch     []byte // text: encoded output, at most textChunk
	err         error
}

// Start turns r into a gRPC request if it is gRPC-Web and returns the
// Writer the rest of the request path must write to (and Finish once it
// has written the answer), or nil when r is not gRPC-Web.
func Start(w http.ResponseWriter, r *http.Request) *Writer {
	ct := r.Header["Content-Type"]
	if len(ct) != 1 {
		return nil
	}
	text, codec, ok := Kind(ct[0])
	if !ok {
		return nil
	}
	r.Header["Content-Type"] = []string{ctGRPC + codec}
	r.Header["Te"] = []string{"trailers"}
	if text {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = NewTextDecoder(r.Body)
		}
		r.ContentLength = -1
		delete(r.Header, "Content-Length")
	}
	return &Writer{w: w, h: make(http.Header), text: text, codec: codec}
}

// Unwrap returns the client's ResponseWriter (for its write deadline).
func (g *Writer) Unwrap() http.ResponseWriter { return g.w }

// Header is the answer's header map, the proxy's to fill.
func (g *Writer) Header() http.Header { return g.h }

// isGRPC reports whether ct is application/grpc or application/grpc+codec.
func isGRPC(ct string) bool {
	rest, ok := strings.CutPrefix(ct, ctGRPC)
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// statusFields are the fields of a trailers-only answer's headers that
// are its trailers.
var statusFields = []string{"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin"}

// WriteHeader writes the answer's head: a gRPC answer as gRPC-Web (its
// content type, no Content-Length or Trailer, a trailers-only answer's
// status kept for the trailer frame), any other as the proxy set it.
func (g *Writer) WriteHeader(code int) {
	if g.wroteHeader {
		return
	}
	g.wroteHeader = true
	dst := g.w.Header()
	g.translate = code == http.StatusOK && isGRPC(g.h.Get("Content-Type"))
	for k, vv := range g.h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		dst[k] = vv
	}
	if g.translate {
		ct := ctWeb
		if g.text {
			ct = ctWebText
		}
		codec := strings.TrimPrefix(g.h.Get("Content-Type"), ctGRPC)
		if i := strings.IndexByte(codec, ';'); i >= 0 {
			codec = codec[:i]
		}
		dst["Content-Type"] = []string{ct + codec}
		g.announced = g.h["Trailer"]
		delete(dst, "Trailer")
		delete(dst, "Content-Length")
		if len(g.h["Grpc-Status"]) > 0 { // trailers-only: the status goes in the trailer frame
			g.only = http.Header{}
			for _, k := range statusFields {
				if vv, ok := g.h[k]; ok {
					g.only[k] = vv
					delete(dst, k)
				}
			}
		}
	}
	g.w.WriteHeader(code)
}

// Write writes body bytes: as they are, or base64-encoded for -text (up
// to 2 bytes held until the next write or flush).
func (g *Writer) Write(p []byte) (int, error) {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	if !g.translate || !g.text {
		return g.w.Write(p)
	}
	if g.err != nil {
		return 0, g.err
	}
	n := len(p)
	for len(p) > 0 { // bounded: each turn takes at least one byte of p
		if g.npending > 0 || len(p) < 3 {
			c := copy(g.pending[g.npending:], p) // complete the held group first
			g.npending, p = g.npending+c, p[c:]
			if g.npending == 3 {
				g.npending = 0
				if err := g.encode(g.pending[:]); err != nil {
					return 0, err
				}
			}
			continue
		}
		take := min(len(p)-len(p)%3, textChunk/4*3)
		if err := g.encode(p[:take]); err != nil {
			return 0, err
		}
		p = p[take:]
	}
	return n, nil
}

// encode writes b (at most textChunk/4×3 bytes) base64-encoded.
func (g *Writer) encode(b []byte) error {
	if g.scratch == nil {
		g.scratch = make([]byte, textChunk)
	}
	m := base64.StdEncoding.EncodedLen(len(b))
	base64.StdEncoding.Encode(g.scratch[:m], b)
	_, err := g.w.Write(g.scratch[:m])
	if err != nil {
		g.err = err
	}
	return err
}

// flushText writes the held bytes, padded (gRPC-Web's text stream may
// hold padding between messages).
func (g *Writer) flushText() error {
	if g.npending == 0 || !g.translate || !g.text {
		return nil
	}
	b := g.pending[:g.npending]
	g.npending = 0
	return g.encode(b)
}

// FlushError sends what was written so far (each message of a server
// stream as it arrives).
func (g *Writer) FlushError() error {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	if err := g.flushText(); err != nil {
		return err
	}
	return flush(g.w)
}

// Flush is FlushError without the error.
func (g *Writer) Flush() { _ = g.FlushError() }

func flush(w http.ResponseWriter) error {
	for range 8 { // bounded: a chain of wrappers this deep is a bug
		switch f := w.(type) {
		case interface{ FlushError() error }:
			return f.FlushError()
		case http.Flusher:
			f.Flush()
			return nil
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	return nil
}

// Finish ends a translated answer: the trailer frame (the upstream's
// trailers, or a trailers-only answer's status) and a flush. Call it once
// the answer was written in full; not after the request path aborted.
func (g *Writer) Finish() error {
	if !g.wroteHeader || !g.translate {
		return nil
	}
	tr := g.only
	if tr == nil {
		tr = http.Header{}
		for k, vv := range g.h {
			if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
				tr[http.CanonicalHeaderKey(name)] = vv
			}
		}
		for _, a := range g.announced {
			for _, k := range strings.Split(a, ",") {
				k = http.CanonicalHeaderKey(strings.TrimSpace(k))
				if vv, ok := g.h[k]; ok && k != "" {
					tr[k] = vv
				}
			}
		}
	}
	if len(tr["Grpc-Status"]) == 0 {
		// An upstream that ended its answer without a status broke the
		// protocol: the client is told so rather than left guessing.
		tr = http.Header{"Grpc-Status": {"13"}, "Grpc-Message": {"upstream sent no grpc-status"}}
	}
	frame, err := AppendTrailerFrame(nil, tr)
	if err != nil {
		frame, _ = AppendTrailerFrame(nil, http.Header{"Grpc-Status": {"13"}, "Grpc-Message": {"trailers too large"}})
	}
	if g.text {
		if err := g.flushText(); err != nil {
			return err
		}
		for len(frame) > 0 { // bounded: the frame is at most MaxTrailerFrame+5
			take := min(len(frame), textChunk/4*3)
			if err := g.encode(frame[:take]); err != nil {
				return err
			}
			frame = frame[take:]
		}
	} else if _, err := g.w.Write(frame); err != nil {
		return err
	}
	return flush(g.w)
}

// ErrTrailersTooLarge is AppendTrailerFrame's error for trailers that do
// not fit MaxTrailerFrame or maxTrailerFields.
var ErrTrailersTooLarge = errors.New("grpcweb: trailers too large")

// AppendTrailerFrame appends the trailer frame of tr to b: flag 0x80, the
// payload's length (4 bytes, big-endian) and one "key: value\r\n" line per
// value, keys lower-case, in sorted order (deterministic). Values with a
// CR or LF, and names ParseTrailers would refuse, are left out (they could
// split a line).
func AppendTrailerFrame(b []byte, tr http.Header) ([]byte, error) {
	keys := make([]string, 0, len(tr))
	for k := range tr {
		keys = append(keys, k)
	}
	sortStrings(keys)
	start := len(b)
	b = append(b, 0x80, 0, 0, 0, 0)
	fields := 0
	for _, k := range keys {
		for _, v := range tr[k] {
			if strings.ContainsAny(v, "\r\n") || !fieldName(k) {
				continue
			}
			fields++
			b = append(b, strings.ToLower(k)...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
			if fields > maxTrailerFields || len(b)-start-5 > MaxTrailerFrame {
				return b[:start], ErrTrailersTooLarge
			}
		}
	}
	n := len(b) - start - 5
	b[start+1], b[start+2], b[start+3], b[start+4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return b, nil
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ { // insertion sort: at most a few dozen keys
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Frame errors.
var (
	ErrFrameTooLarge = errors.New("grpcweb: frame longer than the limit")
	ErrBadFlag       = errors.New("grpcweb: unknown frame flag")
	ErrBadTrailers   = errors.New("grpcweb: malformed trailer frame")
)

// ReadFrame reads one gRPC-Web frame from r: its flag (0 a message, 1 a
// compressed message, 0x80 trailers, 0x81 compressed trailers) and its
// payload of at most max bytes. io.EOF before the first byte is the end of
// the stream; any other short read io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, max int) (flag byte, payload []byte, err error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	if head[0]&^0x81 != 0 {
		return 0, nil, ErrBadFlag
	}
	n := uint32(head[1])<<24 | uint32(head[2])<<16 | uint32(head[3])<<8 | uint32(head[4])
	if uint64(n) > uint64(max) {
		return 0, nil, ErrFrameTooLarge
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return head[0], payload, nil
}

// ParseTrailers parses a trailer frame's payload: "key: value" lines, each
// ended by CRLF, keys 1 to 256 of A-Z, a-z, 0-9, "-", "_" and "." (gRPC
// metadata's), values trimmed, at most 64 fields.
func ParseTrailers(p []byte) (http.Header, error) {
	h := http.Header{}
	s := string(p)
	for fields := 0; s != ""; fields++ { // bounded: each turn consumes a line
		if fields == maxTrailerFields {
			return nil, ErrBadTrailers
		}
		line, rest, ok := strings.Cut(s, "\r\n")
		if !ok {
			return nil, ErrBadTrailers
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || !fieldName(k) || strings.ContainsAny(v, "\r\n") {
			return nil, ErrBadTrailers
		}
		h.Add(k, strings.TrimSpace(v))
		s = rest
	}
	return h, nil
}

// fieldName reports whether k is a trailer name ParseTrailers accepts.
func fieldName(k string) bool {
	if k == "" || len(k) > 256 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
