package h1server

import (
	"bytes"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The request-head parser.
//
// parseHead reads one complete request head (request line, header fields,
// the empty line) and returns one of three verdicts:
//
//   - verdictServe: the loop serves the request itself. Only plain
//     HTTP/1.0 and HTTP/1.1 requests with an origin-form target, CRLF line
//     ends, at most maxFields fields, no Transfer-Encoding, Upgrade or
//     Expect, and a valid Content-Length (or none) get here.
//   - verdictReject: the head is malformed, or its framing is ambiguous:
//     an error answer (400, or status) and the connection closes.
//   - verdictHandoff: a valid head the loop does not serve itself goes to
//     net/http on the same connection (which then serves that one request
//     only; see Server.handOff).
//
// Framing is decided here, once, for every head, whoever serves it: every
// check below runs before a handoff, so net/http never sees a head levee
// would refuse (RFC 9112 sections 2.2, 5, 6). Refused, with 400 and close:
//
//   - Content-Length together with Transfer-Encoding (RFC 9112 section
//     6.3 says "ought to be handled as an error"; net/http drops the
//     Content-Length and keeps the connection, where section 6.1 says a
//     server MUST close it);
//   - Transfer-Encoding on an HTTP/1.0 request (net/http ignores it);
//   - a Transfer-Encoding whose last coding is not chunked, or that names
//     chunked twice (section 6.3: the length cannot be determined; 400);
//     codings before a final chunked (gzip, chunked) get 501, as section
//     6.1 advises for a coding the server does not implement;
//   - Content-Length not a plain decimal number, or several that differ;
//   - obs-fold (section 5.2 allows either; net/http joins folded lines);
//   - a bare LF line end (net/http accepts it; section 2.2 allows either)
//     or a bare CR, NUL or another control byte anywhere in the head;
//   - more than one Host, a malformed Host, no Host on HTTP/1.1;
//   - the PRI method other than as the HTTP/2 preface (RFC 9113 3.4).
//
// Versions: HTTP/1.0 and HTTP/1.1 are served; a later HTTP/1.x is checked
// as HTTP/1.1 and handed to net/http, which answers it in HTTP/1.1 (RFC
// 9112 section 2.3: a higher minor version is understood as the highest
// one the server implements); any other major version on an HTTP/1 line
// (HTTP/0.x, HTTP/2.0 other than the exact h2c preface, HTTP/3.0) gets
// 505 and close (RFC 9110 section 15.6.6); an HTTP/0.9 request line (no
// version) is malformed: 400.
//
// Every field is checked, however many there are; only the first
// maxFields are kept in the field table (a head with more is handed off).
//
// Where the loop serves a request, method, URL, Proto, Header, Host,
// ContentLength and Close are what http.ReadRequest plus net/http's server
// checks give for the same bytes; where it hands a request off, method,
// target, framing and body length agree with what net/http then reads
// (FuzzParseHead checks both).
//
// Work is linear in the head's length; the head's length is bounded by the
// server's header cap before parseHead is called.

type verdict uint8

const (
	verdictServe verdict = iota
	verdictReject
	verdictHandoff
)

// Handoff reasons, counted in Stats.
const (
	handoffH2Preface        = iota // PRI * HTTP/2.0: HTTP/2 prior knowledge (h2c)
	handoffUpgrade                 // an Upgrade field (WebSocket, h2c upgrade)
	handoffExpect                  // an Expect field (100-continue)
	handoffTransferEncoding        // a chunked (or other) request body
	handoffOther                   // anything else the loop does not own
	handoffALPNH2                  // a TLS connection that negotiated h2 (ALPN): never read by the loop
	numHandoffReasons
)

// maxFields is the most header fields the loop keeps in its field table;
// a request with more is checked whole and then handed to net/http (which
// bounds it by bytes only). It bounds the per-connection field table.
const maxFields = 128

// maxConnFields is how many Connection field lines the loop reads for
// close and keep-alive; a request with more is handed off.
const maxConnFields = 4

// field is one header field line, as offsets into the head.
type field struct {
	k0, k1 uint32 // name
	v0, v1 uint32 // value, trimmed of SP and HTAB
}

// head is a parsed request head. Strings are substrings of raw; fields
// index raw. It is reused per connection.
type head struct {
	raw    []byte
	m1     uint32 // the method is raw[:m1]
	t0, t1 uint32 // the target is raw[t0:t1]
	minor  int    // 1: HTTP/1.1, 0: HTTP/1.0 (2..9: a later HTTP/1.x, handed off)

	fields  []field
	nHost   int
	host    field
	length  int64 // -1: no Content-Length
	chunked bool  // Transfer-Encoding: chunked (the body's framing)
	closeRq bool  // the request asks to close the connection (http.Request.Close)
	keep10  bool  // HTTP/1.0 with Connection: keep-alive

	// addCacheControl: Pragma: no-cache without Cache-Control, to which
	// net/http adds Cache-Control: no-cache.
	addCacheControl bool
	// status is the answer to a verdictReject: 0 means 400.
	status int
	// rejectText is the reason text of a reject (may be empty).
	rejectText string
	// handoff is the reason of a verdictHandoff.
	handoff int
}

// Field names the parser looks for, canonical.
var (
	nameHost             = []byte("Host")
	nameContentLength    = []byte("Content-Length")
	nameTransferEncoding = []byte("Transfer-Encoding")
	nameConnection       = []byte("Connection")
	nameUpgrade          = []byte("Upgrade")
	nameExpect           = []byte("Expect")
)

// Reject texts of levee's own framing checks (where net/http has none).
const (
	textCLAndTE        = "Content-Length with Transfer-Encoding"
	textTEOnHTTP10     = "Transfer-Encoding on HTTP/1.0"
	textBadTE          = "Transfer-Encoding other than a final chunked"
	textUnsupportedTE  = "unsupported transfer coding"
	textBadCL          = "malformed or conflicting Content-Length"
	textObsFold        = "obs-fold"
	textBareLF         = "bare LF line end"
	textBadField       = "malformed header field"
	textBadVersion     = "HTTP version not supported"
	textBadRequestLine = "malformed request line"
	textPRI            = "PRI is only the HTTP/2 preface"
)

// teState follows the codings of the Transfer-Encoding fields, in order.
type teState struct {
	codings int  // codings seen
	chunked int  // of which chunked
	last    bool // the last one was chunked
	bad     bool // an empty element
}

func (t *teState) add(v []byte) {
	for {
		var el []byte
		i := bytes.IndexByte(v, ',')
		if i >= 0 {
			el = v[:i]
		} else {
			el = v
		}
		el = bytes.Trim(el, " \t")
		if len(el) == 0 {
			t.bad = true
		} else {
			t.codings++
			t.last = len(el) == len("chunked") && asciiEqualFold(el, "chunked")
			if t.last {
				t.chunked++
			}
		}
		if i < 0 {
			return
		}
		v = v[i+1:]
	}
}

// reject ends parse with an error answer.
func (h *head) reject(status int, text string) verdict {
	h.status, h.rejectText = status, text
	return verdictReject
}

// parse parses raw, which holds exactly one request head as findHeadEnd
// delimited it: CRLF-ended lines, the last one empty. It canonicalizes
// field names in place.
func (h *head) parse(raw []byte) verdict {
	h.raw = raw
	h.fields = h.fields[:0]
	h.nHost = 0
	h.length = -1
	h.chunked = false
	h.closeRq, h.keep10 = false, false
	h.status, h.rejectText = 0, ""
	h.addCacheControl = false
	h.handoff = -1

	eol := bytes.IndexByte(raw, '\n') // raw ends in CRLF CRLF: found
	line := raw[:eol-1]
	// request-line = method SP request-target SP HTTP-version, split as
	// net/http does (at the first two spaces).
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 < 0 {
		return verdictReject
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 < 0 {
		return verdictReject
	}
	method, target, proto := line[:sp1], rest[:sp2], rest[sp2+1:]
	if len(method) == 0 || !allToken(method) {
		return verdictReject
	}
	h.m1 = uint32(sp1)
	h.t0, h.t1 = uint32(sp1+1), uint32(sp1+1+sp2)
	switch string(proto) {
	case "HTTP/1.1":
		h.minor = 1
	case "HTTP/1.0":
		h.minor = 0
	default:
		if !validVersionShape(proto) {
			return h.reject(0, textBadRequestLine)
		}
		if proto[5] != '1' {
			if string(proto) == "HTTP/2.0" && string(method) == "PRI" && string(target) == "*" && len(raw) == eol+3 {
				return h.handOff(handoffH2Preface) // PRI * HTTP/2.0, no fields
			}
			return h.reject(http.StatusHTTPVersionNotSupported, textBadVersion)
		}
		h.minor = int(proto[7] - '0')
		h.handoff = handoffOther
	}
	if len(target) == 0 || hasCTL(target) {
		return verdictReject // url.ParseRequestURI fails
	}
	if string(method) == "PRI" {
		return h.reject(0, textPRI)
	}
	if target[0] != '/' || string(method) == "CONNECT" {
		h.handoff = handoffOther // checked whole, then net/http's
	}

	var nCL, nUpgrade, nExpect int
	var te teState
	var cl0 field
	var connVals [maxConnFields]field // the first Connection values, for close/keep-alive
	nConn := 0
	// net/http's fixPragmaCacheControl: a first Pragma value of no-cache
	// without Cache-Control adds Cache-Control: no-cache.
	seenPragma, pragmaNoCache, haveCacheControl := false, false, false

	pos := eol + 1
	for {
		rel := bytes.IndexByte(raw[pos:], '\n')
		end := pos + rel // index of '\n'; the line is raw[pos:end-1]
		if end-1 == pos {
			break // the empty line
		}
		c := raw[pos]
		if c == ' ' || c == '\t' {
			return h.reject(0, textObsFold)
		}
		colon := bytes.IndexByte(raw[pos:end-1], ':')
		if colon <= 0 {
			return h.reject(0, textBadField) // no colon, or an empty name
		}
		k0, k1 := pos, pos+colon
		if !allToken(raw[k0:k1]) {
			return h.reject(0, textBadField) // invalid byte in the name (space included)
		}
		v0, v1 := k1+1, end-1
		for i := v0; i < v1; i++ {
			if !validValueByte(raw[i]) {
				return h.reject(0, textBadField) // NUL, bare CR, another CTL
			}
		}
		for v0 < v1 && (raw[v0] == ' ' || raw[v0] == '\t') {
			v0++
		}
		for v1 > v0 && (raw[v1-1] == ' ' || raw[v1-1] == '\t') {
			v1--
		}
		canonicalize(raw[k0:k1])
		f := field{uint32(k0), uint32(k1), uint32(v0), uint32(v1)}
		if len(h.fields) < maxFields {
			h.fields = append(h.fields, f)
		} else {
			h.handoff = handoffOther // every field is still checked
		}
		name := raw[k0:k1]
		switch len(name) {
		case 4:
			if bytes.Equal(name, nameHost) {
				h.nHost++
				h.host = f
			}
		case 6:
			if bytes.Equal(name, nameExpect) {
				nExpect++
			} else if string(name) == "Pragma" && !seenPragma {
				seenPragma = true
				pragmaNoCache = string(raw[v0:v1]) == "no-cache"
			}
		case 7:
			if bytes.Equal(name, nameUpgrade) {
				nUpgrade++
			}
		case 10:
			if bytes.Equal(name, nameConnection) {
				if nConn < len(connVals) {
					connVals[nConn] = f
				}
				nConn++
			}
		case 13:
			if string(name) == "Cache-Control" {
				haveCacheControl = true
			}
		case 14:
			if bytes.Equal(name, nameContentLength) {
				if nCL == 0 {
					cl0 = f
				} else if !bytes.Equal(raw[cl0.v0:cl0.v1], raw[v0:v1]) {
					return h.reject(0, textBadCL) // conflicting Content-Length values
				}
				nCL++
			}
		case 17:
			if bytes.Equal(name, nameTransferEncoding) {
				te.add(raw[v0:v1])
			}
		}
		pos = end + 1
	}

	if h.nHost > 1 {
		return verdictReject // too many Host headers
	}
	if nCL > 0 {
		n, err := strconv.ParseUint(string(raw[cl0.v0:cl0.v1]), 10, 63)
		if err != nil {
			return h.reject(0, textBadCL) // empty or not a number
		}
		h.length = int64(n)
	}
	if te.codings > 0 || te.bad {
		switch {
		case nCL > 0:
			return h.reject(0, textCLAndTE)
		case h.minor == 0:
			return h.reject(0, textTEOnHTTP10)
		case te.bad || !te.last || te.chunked != 1:
			return h.reject(0, textBadTE)
		case te.codings > 1:
			return h.reject(http.StatusNotImplemented, textUnsupportedTE)
		}
		h.chunked = true
	}
	if h.minor >= 1 && h.nHost == 0 && string(method) != "CONNECT" {
		h.rejectText = "missing required Host header"
		return verdictReject
	}
	if h.nHost == 1 && !validHost(raw[h.host.v0:h.host.v1]) {
		h.rejectText = "malformed Host header"
		return verdictReject
	}
	// The head is valid and its framing decided: who serves it.
	switch {
	case h.handoff >= 0:
		return verdictHandoff
	case h.chunked:
		return h.handOff(handoffTransferEncoding)
	case nUpgrade > 0:
		return h.handOff(handoffUpgrade)
	case nExpect > 0:
		return h.handOff(handoffExpect)
	case nConn > len(connVals):
		return h.handOff(handoffOther)
	}
	hasClose, hasKeep := false, false
	for _, f := range connVals[:nConn] {
		hasClose = hasClose || hasToken(raw[f.v0:f.v1], "close")
		hasKeep = hasKeep || hasToken(raw[f.v0:f.v1], "keep-alive")
	}
	if h.minor == 0 {
		h.closeRq = hasClose || !hasKeep
		h.keep10 = hasKeep
	} else {
		h.closeRq = hasClose
	}
	h.addCacheControl = pragmaNoCache && !haveCacheControl
	return verdictServe
}

func (h *head) handOff(reason int) verdict {
	h.handoff = reason
	return verdictHandoff
}

// findHeadEnd looks for the end of a request head in buf, starting its
// search at from (a line start at or before the first unscanned byte). It
// returns the length of the head (through the empty line's LF) or 0 when
// the head is not complete yet, and bareLF when a line ends in LF without
// CR (the head is then handed to net/http, which accepts those). next is
// where the next call should start.
func findHeadEnd(buf []byte, from int) (n, next int, bareLF bool) {
	pos := from
	for {
		i := bytes.IndexByte(buf[pos:], '\n')
		if i < 0 {
			return 0, pos, false
		}
		end := pos + i
		if end == 0 || buf[end-1] != '\r' {
			return 0, pos, true
		}
		if end-1 == pos {
			return end + 1, end + 1, false // the empty line ends the head
		}
		pos = end + 1
	}
}

// header builds the header map of a head the loop serves, from s, a string
// copy of h.raw: keys and values are substrings of s, so the head costs
// one allocation for its text, one for the map and one for the value
// slices.
func (h *head) header(s string) http.Header {
	n := len(h.fields)
	hdr := make(http.Header, n)
	strs := make([]string, n)
	for _, f := range h.fields {
		k := s[f.k0:f.k1]
		v := s[f.v0:f.v1]
		if vv, ok := hdr[k]; ok {
			if k == "Content-Length" {
				continue // identical duplicates are folded into one (as net/http)
			}
			hdr[k] = append(vv, v)
			continue
		}
		vv := strs[:1:1]
		strs = strs[1:]
		vv[0] = v
		hdr[k] = vv
	}
	delete(hdr, "Host")
	if h.addCacheControl {
		hdr["Cache-Control"] = []string{"no-cache"}
	}
	return hdr
}

// parseURL returns the URL of an origin-form target as url.ParseRequestURI
// would: Path and RawQuery split at the first '?', RawPath only when the
// path is not in its default encoding. Targets with bytes that need
// escaping or percent-encoding take url.ParseRequestURI itself.
func parseURL(target string) (*url.URL, error) {
	path, query := target, ""
	force := false
	for i := 0; i < len(target); i++ {
		if target[i] == '?' {
			path, query = target[:i], target[i+1:]
			break
		}
		if !plainPathByte(target[i]) {
			return url.ParseRequestURI(target)
		}
	}
	if query == "" && len(path) < len(target) {
		// "/p?" sets ForceQuery when it is the only '?'.
		force = true
	}
	if force || strings.IndexByte(query, '?') >= 0 {
		return url.ParseRequestURI(target)
	}
	return &url.URL{Path: path, RawQuery: query}, nil
}
