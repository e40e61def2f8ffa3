package proxy

import (
	"io"
	"net/http"
	"strings"

	"github.com/levee-gw/levee/internal/upstream"
)

// The request screening that keeps what levee checked and what an
// upstream serves the same: header names with "_", h2c, the protocols a
// route allows to Upgrade to, CONNECT and request trailers. Framing itself
// (Content-Length, Transfer-Encoding, line ends) is decided before the
// handler, by the server (internal/h1server in clear text).

// UnderscoreMode is what the handler does with a request header whose
// name holds "_" (Options.UnderscoresInHeaders).
type UnderscoreMode uint8

const (
	// UnderscoresDrop removes such headers before routing, auth and
	// forwarding (the default, as NGINX's underscores_in_headers off):
	// backends that map "-" and "_" to one name (CGI, PHP, Django) would
	// otherwise read X-Api_Key as X-Api-Key, a header levee never saw.
	UnderscoresDrop UnderscoreMode = iota
	// UnderscoresAllow keeps them.
	UnderscoresAllow
	// UnderscoresReject answers 400 bad_header_name.
	UnderscoresReject
)

// screenHeaders drops HTTP2-Settings (never forwarded: with an h2c
// Upgrade it would let an upstream switch the connection to HTTP/2, past
// levee's routing, auth and limits) and applies the underscore mode. It
// reports false when the request is to be refused. It allocates nothing.
func (h *Handler) screenHeaders(hdr http.Header) bool {
	delete(hdr, "Http2-Settings")
	if h.underscores == UnderscoresAllow {
		return true
	}
	for k := range hdr {
		if strings.IndexByte(k, '_') >= 0 {
			if h.underscores == UnderscoresReject {
				return false
			}
			delete(hdr, k) // deleting the current key while ranging is safe
		}
	}
	return true
}

// screenUpgrade keeps in hdr's Upgrade only the protocols allowed (lower
// case names; a client's "name/version" is matched by name), and removes
// Upgrade when none is left: the request then goes upstream as an
// ordinary one (RFC 9110 section 7.8 lets a server ignore Upgrade). h2c is
// never in allowed (config refuses it), so it never reaches an upstream.
func screenUpgrade(hdr http.Header, allowed []string) {
	vv, ok := hdr["Upgrade"]
	if !ok {
		return
	}
	if len(vv) == 1 && upgradeAllowed(vv[0], allowed) {
		return // the common case: one protocol, allowed
	}
	var kept []string
	for _, v := range vv {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			if tok = strings.TrimSpace(tok); tok != "" && upgradeAllowed(tok, allowed) {
				kept = append(kept, tok)
			}
		}
	}
	if len(kept) == 0 {
		delete(hdr, "Upgrade")
		return
	}
	hdr["Upgrade"] = []string{strings.Join(kept, ", ")}
}

// upgradeAllowed reports whether the single protocol p ("name" or
// "name/version") is in allowed.
func upgradeAllowed(p string, allowed []string) bool {
	name, _, _ := strings.Cut(p, "/")
	name = strings.TrimSpace(name)
	if strings.IndexByte(name, ',') >= 0 {
		return false
	}
	for _, a := range allowed {
		if strings.EqualFold(name, a) {
			return true
		}
	}
	return false
}

// allowAllButConnect is the Allow value of a CONNECT refused by a route
// without methods, which matches every method but CONNECT: the methods of
// RFC 9110 section 9 and PATCH.
var allowAllButConnect = []string{"DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT, TRACE"}

// connectAllowed reports whether a CONNECT request may go on to rt: only
// when a route matched and lists CONNECT in its methods explicitly (a
// route without methods matches every method but CONNECT). levee then
// forwards the CONNECT to the route's upstream and relays its answer; it
// opens no tunnel of its own.
func connectAllowed(rt *Route, matched bool) bool {
	if !matched {
		return false
	}
	for _, m := range rt.Methods {
		if m == http.MethodConnect {
			return true
		}
	}
	return false
}

// screenTrailers arranges for the request's trailers (after a chunked
// body) to reach the upstream only when rt allows them by name and the
// client declared them in its Trailer header (the outbound Trailer header
// is written before the body). Every other trailer field is dropped: RFC
// 9110 section 6.5.1 lets a sender put fields in trailers that levee's
// checks on headers never saw (Host, Content-Length, Levee-App,
// X-Forwarded-For, credentials). the outbound request carries only
// outboundTrailer's map, never r.Trailer.
func screenTrailers(r *http.Request, allowed []string) {
	if len(allowed) == 0 || len(r.Trailer) == 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	var fwd http.Header
	for _, k := range allowed {
		if _, declared := r.Trailer[k]; declared && !neverTrailer(k) {
			if fwd == nil {
				fwd = make(http.Header, len(allowed))
			}
			fwd[k] = nil
		}
	}
	if fwd != nil {
		r.Body = &trailerBody{ReadCloser: r.Body, r: r, fwd: fwd}
	}
}

// neverTrailer is the handler's own floor under the configuration's
// check (config.ForbiddenTrailer): fields that frame or route a request,
// or that levee sets, are never forwarded as trailers.
func neverTrailer(k string) bool {
	switch k {
	case "Host", "Content-Length", AppHeader, MirrorHeader, "X-Request-Id", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return upstream.IsHopHeader(k)
}

// trailerBody is a request body whose allowed trailers are copied from
// the inbound request (where the server puts them at the body's end) to
// fwd, the outbound request's trailer map, when the body ends: the
// transport reads fwd after the body, on the same goroutine.
type trailerBody struct {
	io.ReadCloser
	r    *http.Request
	fwd  http.Header
	done bool
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		for k := range b.fwd {
			b.fwd[k] = b.r.Trailer[k]
		}
	}
	return n, err
}

// outboundTrailer is the trailer map of r's outbound requests: the
// allowed trailers screenTrailers set up, or none. The forwarding path may
// have wrapped the body since (clientBody), so it looks beneath that.
func outboundTrailer(r *http.Request) http.Header {
	body := r.Body
	if cb, ok := body.(*clientBody); ok {
		body = cb.rc
	}
	if tb, ok := body.(*trailerBody); ok {
		return tb.fwd
	}
	return nil
}

// switchRequested reports whether a 101 answer switches to a protocol the
// request offered (after screenUpgrade): net/http's transport hands over
// the connection on any 101, so an upstream could otherwise open a tunnel
// levee never allowed (h2c among them).
func switchRequested(req, resp http.Header) bool {
	if !upstream.IsUpgrade(req) {
		return false
	}
	to := resp["Upgrade"]
	if len(to) != 1 {
		return false
	}
	name, _, _ := strings.Cut(to[0], "/")
	name = strings.TrimSpace(name)
	if name == "" || strings.IndexByte(name, ',') >= 0 {
		return false
	}
	for _, v := range req["Upgrade"] {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			offered, _, _ := strings.Cut(strings.TrimSpace(tok), "/")
			if strings.EqualFold(strings.TrimSpace(offered), name) {
				return true
			}
		}
	}
	return false
}
