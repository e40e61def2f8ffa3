package upstream

import (
	"bytes"
	"net/http"
	"net/textproto"
)

// The fast path's response head parser.
//
// http.ReadResponse costs about ten allocations per response (the
// Response, the textproto reader's line, the header map, a string per
// value, the transfer reader, the body and its LimitReader). For the
// common response (HTTP/1.1, a final status that has a body, one valid
// Content-Length, no Transfer-Encoding, Trailer or Connection other than
// keep-alive, every line well formed, the whole head already in the read
// buffer) fastHead builds the same *http.Response for two or three: one
// object holding the Response and up to fastHeadVals values, the header
// map, and a string per line only when the line differs from the same
// line of the connection's previous response. Anything else leaves the
// buffer untouched and returns nil; the caller then parses with
// http.ReadResponse, so every unusual or malformed head keeps exactly the
// standard library's behaviour (its result or its error).

// fastHeadLines bounds the header lines fastHead handles (more: the
// standard parser), and so the per-connection line memory (h1Conn.lines).
const fastHeadLines = 32

// fastHeadVals is how many header values fit in the response's own
// object; a head with more lines allocates one slice for them.
const fastHeadVals = 8

// fastResponse is one allocation: the response and its first values.
type fastResponse struct {
	resp http.Response
	vals [fastHeadVals]string
}

// fastHead parses the response head at the start of c.br's buffer for
// request r, consuming it, or returns nil having consumed nothing. On
// success resp.Body is nil and the body is resp.ContentLength bytes that
// follow in c.br (the caller frames it, h1Body).
//
// Line memory: c.lines[i] is line i of the previous head parsed here (at
// most fastHeadLines+1 strings, each within the 8 KiB read buffer, so
// bounded per connection and freed with it). A line equal to it reuses
// the string (strings are immutable, so responses still in use keep
// theirs); a different line replaces it. Upstreams repeat their heads
// (Server, Content-Type, the status), and Date changes once a second.
func (c *h1Conn) fastHead(r *http.Request) *http.Response {
	if r.Method == http.MethodHead {
		return nil // no body whatever Content-Length says
	}
	buf, _ := c.br.Peek(c.br.Buffered())
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		return nil // the head spans reads: the standard parser waits for it
	}
	head := buf[:end+2] // every line with its CRLF
	fr := &fastResponse{}
	resp := &fr.resp
	var (
		nLines int
		vals   = fr.vals[:0]
		h      http.Header
		cl     int64 = -1
	)
	for len(head) > 0 {
		i := bytes.IndexByte(head, '\n')
		if i < 1 || head[i-1] != '\r' || nLines > fastHeadLines {
			return nil
		}
		line := c.line(nLines, head[:i-1])
		head = head[i+1:]
		if nLines == 0 {
			if !statusLine(line, resp) {
				return nil
			}
			h = make(http.Header, bytes.Count(head, crlf))
			nLines++
			continue
		}
		nLines++
		name, value, ok := headerLine(line)
		if !ok {
			return nil
		}
		if !canonical(name) {
			name = textproto.CanonicalMIMEHeaderKey(name)
		}
		switch name {
		case "Transfer-Encoding", "Trailer":
			return nil
		case "Connection":
			// Keep-alive only: "close" (removed from the header, Close
			// set) and token lists are the standard parser's.
			if !asciiEqualFold(value, "keep-alive") || h[name] != nil {
				return nil
			}
		case "Content-Length":
			if cl >= 0 {
				return nil // repeated: the standard parser dedups or refuses
			}
			if cl = contentLength(value); cl < 0 {
				return nil
			}
		}
		if old := h[name]; old != nil {
			h[name] = append(old[:len(old):len(old)], value)
			continue
		}
		if len(vals) == cap(vals) {
			vals = make([]string, 0, fastHeadLines)
		}
		vals = append(vals, value)
		h[name] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if cl < 0 {
		return nil // no length: read to close, the standard parser's
	}
	resp.Header = h
	resp.ContentLength = cl
	resp.Request = r
	_, _ = c.br.Discard(end + 4)
	return resp
}

var (
	crlf     = []byte("\r\n")
	crlfcrlf = []byte("\r\n\r\n")
)

// line returns b as a string, the one remembered for line i when equal.
func (c *h1Conn) line(i int, b []byte) string {
	if i < len(c.lines) {
		if c.lines[i] == string(b) { // compared without a copy
			return c.lines[i]
		}
		c.lines[i] = string(b)
		return c.lines[i]
	}
	s := string(b)
	if i == len(c.lines) && i <= fastHeadLines {
		c.lines = append(c.lines, s)
	}
	return s
}

// statusLine fills resp from an "HTTP/1.1 ddd[ reason]" line with a final
// status that has a body (not 1xx, 204 or 304), reporting false for
// anything else.
func statusLine(line string, resp *http.Response) bool {
	const proto = "HTTP/1.1 "
	if len(line) < len(proto)+3 || line[:len(proto)] != proto {
		return false
	}
	st := line[len(proto):]
	if len(st) > 3 && st[3] != ' ' {
		return false
	}
	code := 0
	for i := range 3 {
		d := st[i]
		if d < '0' || d > '9' {
			return false
		}
		code = code*10 + int(d-'0')
	}
	if code < 200 || code > 599 || code == 204 || code == 304 {
		return false
	}
	for i := 3; i < len(st); i++ {
		if b := st[i]; b < ' ' && b != '\t' || b == 0x7f {
			return false
		}
	}
	resp.Status, resp.StatusCode = st, code
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	return true
}

// headerLine splits "Name: value" with a token name and a value of visible
// bytes, spaces, tabs and obs-text, trimmed of spaces and tabs.
func headerLine(line string) (name, value string, ok bool) {
	i := 0
	for i < len(line) && line[i] != ':' {
		if !isTokenByte(line[i]) {
			return "", "", false
		}
		i++
	}
	if i == 0 || i == len(line) {
		return "", "", false
	}
	v := line[i+1:]
	for j := 0; j < len(v); j++ {
		if b := v[j]; b < ' ' && b != '\t' || b == 0x7f {
			return "", "", false
		}
	}
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return line[:i], v, true
}

// isTokenByte reports whether b may appear in a field name (RFC 9110 tchar).
func isTokenByte(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	switch b {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// canonical reports whether the token name is already in
// textproto.CanonicalMIMEHeaderKey's form (so it is used as is).
func canonical(name string) bool {
	upper := true
	for i := 0; i < len(name); i++ {
		b := name[i]
		if upper && b >= 'a' && b <= 'z' || !upper && b >= 'A' && b <= 'Z' {
			return false
		}
		upper = b == '-'
	}
	return true
}

// contentLength parses 1 to 18 decimal digits, -1 for anything else.
func contentLength(v string) int64 {
	if len(v) == 0 || len(v) > 18 {
		return -1
	}
	var n int64
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return -1
		}
		n = n*10 + int64(v[i]-'0')
	}
	return n
}

func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}
