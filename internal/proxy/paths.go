package proxy

import (
	"net/http"
	"strings"

	"github.com/levee-gw/levee/internal/urlpath"
)

// Path normalisation before routing.
//
// A gateway that routes one path while its backend serves another lets a
// client past the gateway's authorization: with a public route /users/ and
// a keyed route /users/admin/ on one upstream, "/users/x/../admin/x" must
// not be matched as /users/ and then resolved to /users/admin/x behind
// levee. So the path of every request target is brought to its normal
// form (package urlpath) before the route lookup, and that form is what is
// routed, authorized, hashed, logged and forwarded; what could be read two
// ways is refused, 400 bad_path.
//
// Two readings remain open after normalisation, and both are checked
// against the routing table instead of being refused outright:
//   - ';' path parameters: Tomcat, Jetty and Spring drop them, so
//     "/users;x/admin/x" is /users/admin/x to them;
//   - escaped slashes a route keeps (raw_path routes, or escaped_slashes
//     keep): a backend that decodes %2F sees more segments.
//
// For such a path (rare, so the common path pays nothing) levee also looks
// up what those backends would read; if that reading is routed elsewhere,
// the request is refused.

// WithEscapedSlashes sets what the table's request path does with %2F and
// %5C in a path (server.paths.escaped_slashes; the zero value rejects) and
// returns t. Call it before the table is published.
func (t *Table) WithEscapedSlashes(m urlpath.EscapedSlashes) *Table {
	t.escapedSlashes = m
	return t
}

// routeRequest normalises r's request target and finds its route. On
// success r carries the normal form: URL.Path (decoded, as routed),
// URL.RawPath and RequestURI (origin form, query as received), and for an
// absolute-form target its authority as Host (RFC 9112 section 3.2.2). A
// route with RawPath is routed the same way but keeps the received path
// bytes in RequestURI (and URL.Opaque) for forwarding, unless they start
// with "//". badPath is set when
// the target is refused. sent is the path as the client sent it when that
// differs from the normal form ("" otherwise), for checking signatures
// over the path as sent.
func (t *Table) routeRequest(r *http.Request) (rt *Route, ok bool, allow []string, badPath bool, sent string) {
	target := r.RequestURI
	if target == "" {
		target = r.URL.RequestURI() // a request built in code, not read from a client
	}
	if target[0] != '/' {
		switch {
		case target == "*" && r.Method == http.MethodOptions,
			r.Method == http.MethodConnect && r.URL.Path == "":
			// asterisk-form and authority-form have no path to normalise.
			rt, ok, allow = t.router.LookupRequest(r.Host, r.URL.Path, r.Method, r.Header, r.URL.RawQuery)
			return rt, ok, allow, false, ""
		}
		var host string
		if target, host, ok = originForm(target, r.URL.Host); !ok {
			return nil, false, nil, true, ""
		}
		r.Host = host
		r.URL.Scheme, r.URL.Host, r.URL.User = "", "", nil
	}
	rawPath, query, hasQuery := strings.Cut(target, "?")
	norm, err := urlpath.Normalize(rawPath, t.escapedSlashes)
	slashesKept := t.escapedSlashes == urlpath.Keep
	if err == urlpath.ErrEscapedSlash {
		// Only a raw_path route takes an escaped slash under reject (its
		// backend is meant to get bytes as sent); see below.
		norm, err = urlpath.Normalize(rawPath, urlpath.Keep)
		slashesKept = true
	}
	if err != nil {
		return nil, false, nil, true, ""
	}
	path := urlpath.Unescape(norm)
	r.URL.Path = path
	r.URL.RawPath = ""
	if path != norm {
		r.URL.RawPath = norm
	}
	rt, ok, allow = t.router.LookupRequest(r.Host, path, r.Method, r.Header, r.URL.RawQuery)
	if slashesKept && t.escapedSlashes == urlpath.Reject && (!ok || !rt.RawPath) {
		return nil, false, nil, true, ""
	}
	if !ok {
		return rt, ok, allow, false, ""
	}
	if norm != rawPath {
		sent = rawPath
	}
	if t.ambiguous(r, rt, rawPath, norm, slashesKept) {
		return nil, false, nil, true, ""
	}
	switch {
	case rt.RawPath && !strings.HasPrefix(rawPath, "//"):
		// upstream.OutboundRequest sends an Opaque path verbatim. One that starts
		// with "//" would be read as an authority there, so such a path
		// is forwarded in its normal form, on both transports alike.
		r.RequestURI = target
		r.URL.Opaque = rawPath
	case norm != rawPath || target != r.RequestURI:
		// changed, absolute-form, or built in code
		if hasQuery {
			r.RequestURI = norm + "?" + query
		} else {
			r.RequestURI = norm
		}
	}
	return rt, true, nil, false, sent
}

// asSent returns r as the client sent its path, for a signature check:
// r itself when sent is "", else a shallow copy whose URL has the path as
// net/http had parsed it. The copy is only read.
func asSent(r *http.Request, sent string) *http.Request {
	if sent == "" {
		return r
	}
	u := *r.URL
	u.Opaque, u.Path, u.RawPath = "", urlpath.Unescape(sent), sent
	c := *r
	c.URL = &u
	return &c
}

// originForm reduces an absolute-form target t (http or https, no
// userinfo), whose host net/http parsed as urlHost, to origin form and
// returns it with that host.
// ok is false for any other target that does not start with '/'.
func originForm(t, urlHost string) (target, host string, ok bool) {
	scheme, rest, found := strings.Cut(t, "://")
	if !found || (!strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https")) {
		return "", "", false
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	if authority == "" || strings.IndexByte(authority, '@') >= 0 || urlHost == "" {
		return "", "", false
	}
	target = rest[end:]
	switch {
	case target == "":
		target = "/"
	case target[0] == '?':
		target = "/" + target
	case target[0] == '#':
		return "", "", false
	}
	return target, urlHost, true
}

// ambiguous reports whether a reading of the path that some backends
// apply (';' parameters dropped, escaped slashes decoded) is routed
// differently from norm, the reading levee routed to rt.
func (t *Table) ambiguous(r *http.Request, rt *Route, rawPath, norm string, slashesKept bool) bool {
	params := strings.IndexByte(norm, ';') >= 0 || strings.Contains(norm, "%3B")
	escaped := slashesKept && (strings.Contains(norm, "%2F") || strings.Contains(norm, "%5C"))
	if !params && !escaped {
		return false
	}
	readings := make([]string, 0, 3)
	if params {
		readings = append(readings, stripParams(norm))
	}
	if escaped {
		decoded, err := urlpath.Normalize(rawPath, urlpath.Decode)
		if err != nil {
			return true
		}
		readings = append(readings, decoded)
		if params {
			readings = append(readings, stripParams(decoded))
		}
	}
	for _, p := range readings {
		p, err := urlpath.Normalize(p, urlpath.Keep)
		if err != nil {
			return true
		}
		other, ok, _ := t.router.LookupRequest(r.Host, urlpath.Unescape(p), r.Method, r.Header, r.URL.RawQuery)
		if !ok || other != rt {
			return true
		}
	}
	return false
}

// stripParams drops each segment's ';' parameters (raw ';' or %3B to the
// end of the segment), as servlet containers do before routing.
func stripParams(p string) string {
	var b strings.Builder
	b.Grow(len(p))
	for p != "" {
		seg, rest, more := strings.Cut(p, "/")
		if i := strings.IndexByte(seg, ';'); i >= 0 {
			seg = seg[:i]
		}
		if i := strings.Index(seg, "%3B"); i >= 0 {
			seg = seg[:i]
		}
		b.WriteString(seg)
		if more {
			b.WriteByte('/')
		}
		p = rest
	}
	return b.String()
}
