package h1server

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// bufferBeforeChunking is how much body a response without Content-Length
// holds before committing to chunked encoding (net/http's
// bufferBeforeChunkingSize): a handler that finishes within it gets a
// Content-Length instead.
const bufferBeforeChunking = 2048

var pendingBufs = sync.Pool{New: func() any { b := make([]byte, 0, bufferBeforeChunking); return &b }}

// response is the loop's http.ResponseWriter and http.Flusher. It writes
// the status line and the header map straight into the connection's
// buffered writer when the head is committed (no header clone). It is
// reused by the connection for each request; as the ResponseWriter
// contract says, a handler must not use it after ServeHTTP returned.
//
// Deliberate differences from net/http's: headers are written in map
// order, not sorted; changes to the header map between WriteHeader and the
// first body byte (or the handler's end) are sent (net/http snapshots the
// map at WriteHeader); keys declared in Trailer are never sent in the head.
type response struct {
	c      *conn
	req    *http.Request
	body   *body
	header http.Header // cleared and reused per request

	minor  int  // the request's HTTP/1.minor
	keep10 bool // HTTP/1.0 request with Connection: keep-alive
	isHEAD bool

	status        int
	wroteHeader   bool // a final status was set
	committed     bool // the head was written to the buffer
	handlerDone   bool
	contentLength int64 // -1: not declared
	written       int64
	chunking      bool
	closeAfter    bool
	lingerAfter   bool // close after lingering (a request body left unread)
	writeDeadline bool // the handler set one: cleared when the response ends

	pendp    *[]byte // body held before commit (no Content-Length yet)
	trailers []string
	keys     []string // writeFields' sorted header names, reused
	scratch  [32]byte
	clBuf    [20]byte
}

func (w *response) reset(r *http.Request, b *body, minor int, keep10 bool) {
	clear(w.header)
	*w = response{c: w.c, req: r, body: b, header: w.header, minor: minor, keep10: keep10,
		isHEAD: r.Method == http.MethodHead, contentLength: -1, trailers: w.trailers[:0], keys: w.keys[:0]}
}

// Header returns the response header map.
func (w *response) Header() http.Header { return w.header }

// WriteHeader sets the status (1xx other than 101 is sent at once, as an
// interim response).
func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		return // superfluous, as net/http (which logs it)
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		bw := w.c.writer()
		w.writeStatusLine(code)
		w.writeFields(exclCL | exclTE)
		bw.WriteString("\r\n")
		_ = bw.Flush()
		return
	}
	w.wroteHeader = true
	w.status = code
	if cl := get(w.header, "Content-Length"); cl != "" {
		v, err := strconv.ParseInt(cl, 10, 64)
		if err == nil && v >= 0 {
			w.contentLength = v
		} else {
			delete(w.header, "Content-Length")
		}
	}
	for _, v := range w.header["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if k != "" && !badTrailer[k] {
				w.trailers = append(w.trailers, k)
			}
		}
	}
}

// badTrailer are the fields that may not be trailers
// (httpguts.ValidTrailerHeader).
var badTrailer = map[string]bool{
	"Authorization": true, "Cache-Control": true, "Connection": true, "Content-Encoding": true,
	"Content-Length": true, "Content-Range": true, "Content-Type": true, "Expect": true,
	"Host": true, "Keep-Alive": true, "Max-Forwards": true, "Pragma": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true, "Proxy-Connection": true,
	"Range": true, "Realm": true, "Te": true, "Trailer": true, "Transfer-Encoding": true,
	"Www-Authenticate": true,
}

func get(h http.Header, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func bodyAllowedForStatus(code int) bool {
	return !(code >= 100 && code <= 199 || code == http.StatusNoContent || code == http.StatusNotModified)
}

// Write writes body bytes: held (up to bufferBeforeChunking) while the
// length is unknown, then framed (chunked) or raw into the buffer.
func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if !w.committed {
		if w.contentLength == -1 {
			if w.pendp == nil {
				w.pendp = pendingBufs.Get().(*[]byte)
			}
			if len(*w.pendp)+len(p) <= bufferBeforeChunking {
				*w.pendp = append(*w.pendp, p...)
				return len(p), nil
			}
		}
		w.commit(p)
	}
	if err := w.emit(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteString is Write for a string.
func (w *response) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// emit writes held bytes and p as body (one chunk when chunking).
func (w *response) emit(p []byte) error {
	var held []byte
	if w.pendp != nil {
		held = *w.pendp
	}
	n := len(held) + len(p)
	if n == 0 || w.isHEAD {
		w.dropPending()
		return nil
	}
	bw := w.c.writer()
	if w.chunking {
		b := strconv.AppendInt(w.scratch[:0], int64(n), 16)
		b = append(b, '\r', '\n')
		bw.Write(b)
	}
	bw.Write(held)
	w.dropPending()
	_, err := bw.Write(p)
	if w.chunking {
		_, err = bw.WriteString("\r\n")
	}
	return err
}

func (w *response) dropPending() {
	if w.pendp != nil {
		*w.pendp = (*w.pendp)[:0]
		pendingBufs.Put(w.pendp)
		w.pendp = nil
	}
}

// SetWriteDeadline bounds the response's writes to the client until t
// (http.ResponseController calls it): a write past it fails, and the
// connection closes after the response. The deadline ends with the
// response, so the next request on the connection starts without one.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.writeDeadline = true
	return w.c.nc.SetWriteDeadline(t)
}

// SetReadDeadline bounds the request body's reads until t
// (http.ResponseController calls it; the proxy's body timeout sets one
// before each read of a body and clears it after). While one is set, the
// body's reads keep it instead of clearing the head's deadline; t zero
// clears it. It may be called from the goroutine that reads the body (a
// transport's), so its state is atomic; the loop clears what is left of it
// when the response ends.
func (w *response) SetReadDeadline(t time.Time) error {
	w.c.bodyDeadline.Store(!t.IsZero())
	return w.c.nc.SetReadDeadline(t)
}

// Flush sends what is buffered (committing the head first).
func (w *response) Flush() { _ = w.FlushError() }

// FlushError is Flush reporting the write error (http.ResponseController
// uses it).
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(nil)
		if err := w.emit(nil); err != nil {
			return err
		}
	}
	return w.c.writer().Flush()
}

// finish completes the response after the handler returned: the head if
// not written yet (with a Content-Length for a short body), the held
// body, the last chunk and trailers; then it flushes.
func (w *response) finish() {
	w.handlerDone = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(nil)
		_ = w.emit(nil)
	}
	bw := w.c.writer()
	if w.chunking {
		bw.WriteString("0\r\n")
		for _, k := range w.trailers {
			for _, v := range w.header[k] {
				writeField(bw, k, v)
			}
		}
		for k, vv := range w.header {
			if strings.HasPrefix(k, http.TrailerPrefix) {
				for _, v := range vv {
					writeField(bw, k[len(http.TrailerPrefix):], v)
				}
			}
		}
		bw.WriteString("\r\n")
	}
	if !w.isHEAD && w.contentLength != -1 && bodyAllowedForStatus(w.status) && w.contentLength != w.written {
		w.closeAfter = true // the body fell short: the framing is off
	}
	if bw.Flush() != nil {
		w.closeAfter = true
	}
	if w.writeDeadline {
		_ = w.c.nc.SetWriteDeadline(time.Time{})
	}
	if b := w.body; b != nil {
		b.mu.Lock()
		if b.early {
			w.closeAfter = true
		}
		b.mu.Unlock()
	}
}

// Fields commit leaves out of the handler's map (it writes its own or none).
const (
	exclCL = 1 << iota
	exclTE
	exclConnection
	exclCT
)

// commit decides the framing and the connection's fate, as net/http's
// chunkWriter.writeHeader does, and writes the head into the buffer. p is
// the first body bytes, for Content-Type sniffing when none is set.
func (w *response) commit(p []byte) {
	w.committed = true
	h := w.header
	code := w.status
	keepAlives := !w.c.srv.inShutdown.Load()
	sniff := p
	if w.pendp != nil && len(*w.pendp) > 0 {
		sniff = *w.pendp
	}
	excl := 0

	trailers := len(w.trailers) > 0
	if !trailers {
		for k := range h {
			if strings.HasPrefix(k, http.TrailerPrefix) {
				trailers = true
				break
			}
		}
	}
	te := get(h, "Transfer-Encoding")
	hasTE := te != ""

	var setCL []byte
	if w.handlerDone && !trailers && !hasTE && bodyAllowedForStatus(code) && h["Content-Length"] == nil && (!w.isHEAD || len(sniff) > 0) {
		w.contentLength = int64(len(sniff))
		setCL = strconv.AppendInt(w.clBuf[:0], w.contentLength, 10)
	}
	if w.keep10 && keepAlives && get(h, "Content-Length") != "" && get(h, "Connection") == "keep-alive" {
		w.closeAfter = false
	}
	hasCL := w.contentLength != -1
	setConn := ""
	if w.keep10 && (w.isHEAD || hasCL || !bodyAllowedForStatus(code)) {
		if _, ok := h["Connection"]; !ok {
			setConn = "keep-alive"
		}
	} else if w.minor == 0 || w.req.Close {
		w.closeAfter = true
	}
	if get(h, "Connection") == "close" || !keepAlives {
		w.closeAfter = true
	}

	if b := w.body; b != nil && !w.closeAfter {
		b.mu.Lock()
		switch {
		case b.closed:
			if !b.sawEOF {
				w.closeAfter = true
			}
		case !b.sawEOF && b.remaining >= maxDrain:
			w.closeAfter, w.lingerAfter = true, true
			excl |= exclConnection
			setConn = "close"
		default:
			b.drainLocked()
			if b.early {
				w.closeAfter = true
			}
		}
		b.mu.Unlock()
	}

	setCT := ""
	if bodyAllowedForStatus(code) {
		if _, haveType := h["Content-Type"]; !haveType && get(h, "Content-Encoding") == "" && !hasTE && len(sniff) > 0 {
			setCT = http.DetectContentType(sniff)
		}
	} else {
		excl |= exclCL | exclTE
		if code == http.StatusNotModified {
			excl |= exclCT
		}
	}
	if hasCL && hasTE && te != "identity" {
		excl |= exclCL
		hasCL = false
	}
	setTE := ""
	switch {
	case w.isHEAD || !bodyAllowedForStatus(code):
		excl |= exclTE
	case hasCL:
		excl |= exclTE
	case w.minor >= 1:
		if te == "identity" {
			w.closeAfter = true
			excl |= exclTE
		} else {
			w.chunking = true
			setTE = "chunked"
			if te == "chunked" {
				excl |= exclTE
			}
		}
	default:
		w.closeAfter = true
		excl |= exclTE
	}
	if w.chunking {
		excl |= exclCL
	}
	if w.closeAfter && (!keepAlives || !hasToken([]byte(get(h, "Connection")), "close")) && !(code == http.StatusSwitchingProtocols && h["Upgrade"] != nil) {
		excl |= exclConnection
		if w.minor >= 1 {
			setConn = "close"
		}
	}

	bw := w.c.writer()
	w.writeStatusLine(code)
	w.writeFields(excl)
	if _, ok := h["Date"]; !ok {
		bw.WriteString("Date: ")
		bw.Write(w.c.httpDate())
		bw.WriteString("\r\n")
	}
	if setCL != nil {
		bw.WriteString("Content-Length: ")
		bw.Write(setCL)
		bw.WriteString("\r\n")
	}
	if setCT != "" {
		writeField(bw, "Content-Type", setCT)
	}
	if setConn != "" {
		writeField(bw, "Connection", setConn)
	}
	if setTE != "" {
		writeField(bw, "Transfer-Encoding", setTE)
	}
	bw.WriteString("\r\n")
}

func (w *response) writeStatusLine(code int) {
	bw := w.c.writer()
	if w.minor >= 1 {
		bw.WriteString("HTTP/1.1 ")
	} else {
		bw.WriteString("HTTP/1.0 ")
	}
	bw.Write(strconv.AppendInt(w.scratch[:0], int64(code), 10))
	bw.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		bw.WriteString(text)
	} else {
		bw.WriteString("status code ")
		bw.Write(strconv.AppendInt(w.scratch[:0], int64(code), 10))
	}
	bw.WriteString("\r\n")
}

// writeFields writes the handler's header map, less the excluded fields,
// trailers and invalid names, sorted by name (as net/http does): the same
// response always has the same bytes, whatever the map's order.
func (w *response) writeFields(excl int) {
	bw := w.c.writer()
	keys := w.keys[:0]
	for k := range w.header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vv := w.header[k]
		switch k {
		case "Content-Length":
			if excl&exclCL != 0 {
				continue
			}
		case "Transfer-Encoding":
			if excl&exclTE != 0 {
				continue
			}
		case "Connection":
			if excl&exclConnection != 0 {
				continue
			}
		case "Content-Type":
			if excl&exclCT != 0 {
				continue
			}
		case "Trailer":
		default:
			if w.isTrailer(k) || !allTokenString(k) {
				continue
			}
		}
		for _, v := range vv {
			writeField(bw, k, v)
		}
	}
	clear(keys) // hold no header names until the next response
	w.keys = keys[:0]
}

func (w *response) isTrailer(k string) bool {
	if strings.HasPrefix(k, http.TrailerPrefix) {
		return true
	}
	for _, t := range w.trailers {
		if t == k {
			return true
		}
	}
	return false
}

func allTokenString(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenTable[s[i]] {
			return false
		}
	}
	return true
}

// writeField writes "k: v" with v made safe as net/http makes it: CR and
// LF become spaces, surrounding whitespace is trimmed.
func writeField(bw interface {
	WriteString(string) (int, error)
}, k, v string) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\r' || c == '\n' {
			v = strings.Map(func(r rune) rune {
				if r == '\r' || r == '\n' {
					return ' '
				}
				return r
			}, v)
			break
		}
	}
	if len(v) > 0 && (v[0] <= ' ' || v[len(v)-1] <= ' ') {
		v = strings.Trim(v, " \t\r\n")
	}
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}

// dateValue is the Date header value of the current second, shared by
// every connection: formatted once a second for the process rather than
// once per connection (under overload, thousands of new connections each
// formatted their own, growing each one's stack to do it).
type dateValue struct {
	sec int64
	b   [29]byte
}

var currentDate atomic.Pointer[dateValue]

// httpDate returns the Date value for now. Two connections crossing a
// second at once may both format it; either result is right.
func (c *conn) httpDate() []byte {
	now := time.Now()
	sec := now.Unix()
	d := currentDate.Load()
	if d == nil || d.sec != sec {
		d = &dateValue{sec: sec}
		now.UTC().AppendFormat(d.b[:0], http.TimeFormat)
		currentDate.Store(d)
	}
	return d.b[:]
}
