package upstream

// What an attempt sends: the inbound request's headers less hop-by-hop
// ones, plus levee's forwarding headers. OutboundHeader builds them as a map
// for net/http's transport; writeRequestHead writes the same head straight
// to the wire for the fast path (TestWriteRequestHeadMatchesOutboundHeader
// keeps the two equal).

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// OutboundRequest builds the request sent upstream through an
// http.RoundTripper: r's method, path, query and body, addressed to the
// endpoint at o.Addr, with OutboundHeader's headers.
func OutboundRequest(ctx context.Context, r *http.Request, o Outbound) *http.Request {
	addr, reqID, body, length := o.Addr, o.RequestID, o.Body, o.Length
	out := r.WithContext(ctx)
	out.Body, out.ContentLength = body, length
	out.URL = &url.URL{Scheme: "http", Host: addr, Opaque: r.URL.Opaque, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	out.RequestURI = ""
	out.Close = false
	out.Proto, out.ProtoMajor, out.ProtoMinor = "HTTP/1.1", 1, 1
	out.Header = OutboundHeader(r, reqID, o.ForwardedFor)
	out.Trailer = o.Trailer // never r.Trailer: the proxy screens trailers
	if length == 0 {
		out.Body = nil // nothing to send: spare the transport a body copy
	}
	return out
}

// hopHeaders are meaningful for one connection only (RFC 9110 section
// 7.6.1) and are never forwarded. Headers named in Connection are removed
// too.
var hopHeaders = [...]string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// IsHopHeader reports whether k (canonical) is a hop-by-hop header.
func IsHopHeader(k string) bool {
	for _, h := range hopHeaders {
		if k == h {
			return true
		}
	}
	return false
}

// ConnectionListed reports whether the comma-separated header values list
// the token k (case-insensitively), as Connection lists header names.
func ConnectionListed(conn []string, k string) bool {
	for _, v := range conn {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.TrimSpace(tok), k) {
				return true
			}
		}
	}
	return false
}

// IsUpgrade reports whether h asks to switch protocols (Upgrade, listed in
// Connection).
func IsUpgrade(h http.Header) bool {
	return len(h["Upgrade"]) > 0 && ConnectionListed(h["Connection"], "upgrade")
}

// OutboundHeader builds the headers sent upstream: the client's, less
// hop-by-hop ones, plus X-Forwarded-For/-Proto/-Host and X-Request-Id.
// Values are shared with the inbound header (never mutated), not copied.
// X-Forwarded-For is xff when set (Outbound.ForwardedFor: a trusted
// proxy's chain), else the peer's address alone: the client's is replaced,
// never appended to, and its Forwarded header is dropped.
func OutboundHeader(r *http.Request, reqID, xff string) http.Header {
	in := r.Header
	out := make(http.Header, len(in)+4)
	conn := in["Connection"]
	for k, vv := range in {
		if IsHopHeader(k) || (len(conn) > 0 && ConnectionListed(conn, k)) {
			continue
		}
		out[k] = vv
	}
	if te := in["Te"]; len(te) > 0 && ConnectionListed(te, "trailers") {
		out["Te"] = []string{"trailers"}
	}
	if IsUpgrade(in) {
		out["Connection"] = []string{"Upgrade"}
		out["Upgrade"] = in["Upgrade"]
	}
	if xff != "" {
		out["X-Forwarded-For"] = []string{xff}
	} else if clientIP, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		out["X-Forwarded-For"] = []string{clientIP}
		delete(out, "Forwarded")
	} else {
		delete(out, "X-Forwarded-For")
		delete(out, "Forwarded")
	}
	if r.TLS != nil {
		out["X-Forwarded-Proto"] = protoHTTPS
	} else {
		out["X-Forwarded-Proto"] = protoHTTP
	}
	if r.Host != "" {
		out["X-Forwarded-Host"] = []string{r.Host}
	}
	out["X-Request-Id"] = []string{reqID}
	if _, ok := in["User-Agent"]; !ok {
		// An empty value tells net/http to send none, instead of adding
		// its own "Go-http-client/1.1" to a request that had no agent.
		out["User-Agent"] = emptyValue
	}
	return out
}

var (
	emptyValue = []string{""}
	protoHTTP  = []string{"http"}
	protoHTTPS = []string{"https"}
)

// writeRequestHead writes r's request head as sent upstream: the request
// line with the origin-form target, Host, and the headers OutboundHeader
// would send (the client's less hop-by-hop ones, X-Forwarded-*,
// X-Request-Id), in map order. It builds no header map and allocates
// nothing. A value carrying CR or LF fails it with errInvalidHeader (the
// server in front rejects those already; this keeps it so).
// X-Forwarded-For and Forwarded as OutboundHeader sends them for xff.
func writeRequestHead(bw *bufio.Writer, r *http.Request, addr, reqID, xff string) error {
	target := r.RequestURI
	if target == "*" && r.Method == http.MethodOptions {
		// asterisk-form: OPTIONS for the server as a whole
	} else if !validTarget(target) {
		target = r.URL.RequestURI()
		if !validTarget(target) {
			return errInvalidHeader
		}
	}
	host := r.Host
	if host == "" {
		host = addr
	}
	if !validValue(host) {
		return errInvalidHeader
	}
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(target)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")

	in := r.Header
	conn := in["Connection"]
	clientIP, _, ipErr := net.SplitHostPort(r.RemoteAddr)
	for k, vv := range in {
		if IsHopHeader(k) || (len(conn) > 0 && ConnectionListed(conn, k)) {
			continue
		}
		switch k {
		case "Host", "Content-Length", "X-Forwarded-Proto", "X-Request-Id":
			continue // written below, or not at all
		case "X-Forwarded-For":
			continue // the client's is replaced: written below
		case "Forwarded":
			if xff == "" {
				continue // from an untrusted peer: dropped
			}
		case "X-Forwarded-Host":
			if r.Host != "" {
				continue
			}
		case "User-Agent":
			// As http.Transport: the first value, and none when empty.
			if len(vv) > 0 && vv[0] != "" {
				vv = vv[:1]
			} else {
				continue
			}
		}
		for _, v := range vv {
			if !validValue(v) {
				return errInvalidHeader
			}
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	if te := in["Te"]; len(te) > 0 && ConnectionListed(te, "trailers") {
		bw.WriteString("Te: trailers\r\n")
	}
	if xff != "" || ipErr == nil {
		if xff == "" {
			xff = clientIP
		} else if !validValue(xff) {
			return errInvalidHeader
		}
		bw.WriteString("X-Forwarded-For: ")
		bw.WriteString(xff)
		bw.WriteString("\r\n")
	}
	if r.TLS != nil {
		bw.WriteString("X-Forwarded-Proto: https\r\n")
	} else {
		bw.WriteString("X-Forwarded-Proto: http\r\n")
	}
	if r.Host != "" {
		bw.WriteString("X-Forwarded-Host: ")
		bw.WriteString(r.Host)
		bw.WriteString("\r\n")
	}
	bw.WriteString("X-Request-Id: ")
	bw.WriteString(reqID)
	bw.WriteString("\r\n")
	if r.Method == http.MethodPut {
		// As http.Transport: a bodiless PUT says so.
		bw.WriteString("Content-Length: 0\r\n")
	}
	_, err := bw.WriteString("\r\n")
	return err
}

// validTarget accepts an origin-form request target with no space or
// control byte (so it cannot split the request line).
func validTarget(s string) bool {
	if s == "" || s[0] != '/' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b == 0x7f {
			return false
		}
	}
	return true
}

// validValue rejects a header value that could end its line early.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b == '\r' || b == '\n' || b == 0 {
			return false
		}
	}
	return true
}
