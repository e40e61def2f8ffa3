package admin

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/levee-gw/levee/internal/adminui"
)

// This file keeps a web page from driving the admin API. A page the
// operator opens in a browser can send requests to the admin listener
// (it is on loopback, the browser is too): "simple" cross-origin requests
// (a form post, a fetch with Content-Type text/plain or mode no-cors) go
// out without a CORS preflight, and DNS rebinding makes a hostile domain
// resolve to 127.0.0.1, so that the page is same-origin with the admin
// API as far as the browser knows. Three checks, in this order, before
// the token check (requireToken) and the handlers:
//
//  1. Host (guardBrowser): an IP literal, "localhost" or a name of
//     admin.hosts, any port; anything else is 421 host_not_allowed. A
//     rebinding page's requests carry its own domain in Host. /healthz
//     and /readyz are exempt (probePath).
//  2. Origin and Sec-Fetch-Site (guardBrowser): an Origin other than the
//     listener's own (scheme://Host of the request), or Sec-Fetch-Site
//     other than same-origin or none, is 403 cross_origin. Browsers send
//     Origin on every cross-origin request but a simple GET, and
//     Sec-Fetch-Site on every request to a trustworthy origin (loopback
//     is one); programs send neither. A top-level navigation to the web
//     UI's files is let through (uiNavigation): they hold no data.
//  3. Content-Type (requireJSON, after the token): a write (any method
//     but GET, HEAD and OPTIONS) must say application/json, or have no
//     body and no Content-Type; anything else is 415
//     unsupported_media_type. No browser can send application/json
//     cross-origin without a preflight, which this API never answers.
//
// Each check alone stops the attacks the issue found; together they do
// not depend on a browser's version or settings.

// guardBrowser refuses requests whose Host is not the admin listener's
// (421) and cross-origin requests (403), then calls next. hosts returns
// admin.hosts, read per request so that a reload can change it; nil
// means no names beyond IPs and localhost.
func guardBrowser(hosts func() []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !probePath(r.URL.Path) && !hostAllowed(r.Host, hosts) {
			writeError(w, http.StatusMisdirectedRequest, "host_not_allowed",
				"the admin API answers only requests whose Host is an IP address, localhost or a name in admin.hosts; got "+quoteShort(r.Host))
			return
		}
		if why := crossOrigin(r); why != "" {
			writeError(w, http.StatusForbidden, "cross_origin", "the admin API refuses requests a web page sent from another origin ("+why+")")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// probePath reports whether path is a probe's: /healthz and /readyz take
// any Host. Orchestrators and load balancers probe with the address they
// were given (a pod IP, which passes, but also a service's DNS name an
// operator need not list), and a failing liveness probe restarts levee;
// what the probes answer is no secret (they need no token either).
func probePath(path string) bool { return path == "/healthz" || path == "/readyz" }

// hostAllowed reports whether host (a request's Host: host[:port]) names
// the admin listener: an IP literal, "localhost" or one of hosts(), case
// and a trailing dot ignored, any port. An empty Host (HTTP/1.0 without
// one; net/http refuses it on HTTP/1.1) is allowed: no browser sends it.
func hostAllowed(host string, hosts func() []string) bool {
	if host == "" {
		return true
	}
	name := hostOnly(host)
	if name == "" {
		return false
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	name = strings.TrimSuffix(name, ".")
	if strings.EqualFold(name, "localhost") {
		return true
	}
	if hosts == nil {
		return false
	}
	for _, h := range hosts() { // at most config.MaxAdminHosts
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

// hostOnly returns host[:port]'s host, without an IPv6 literal's
// brackets; "" when it cannot be read.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	if strings.HasPrefix(hostport, "[") {
		if !strings.HasSuffix(hostport, "]") {
			return ""
		}
		return hostport[1 : len(hostport)-1]
	}
	if strings.Contains(hostport, ":") {
		return "" // a bare IPv6 address, or garbage: not a Host a browser sends
	}
	return hostport
}

// crossOrigin returns why r was sent by a page of another origin, or ""
// when it was not (or the client is not a browser).
func crossOrigin(r *http.Request) string {
	if site := r.Header.Values("Sec-Fetch-Site"); len(site) > 0 {
		switch {
		case len(site) > 1:
			return "Sec-Fetch-Site sent twice"
		case site[0] == "same-origin" || site[0] == "none":
		case uiNavigation(r):
			// A link to the UI from another site opens it; the page's own
			// calls are same-origin.
		default:
			return "Sec-Fetch-Site: " + quoteShort(site[0])
		}
	}
	origin := r.Header.Values("Origin")
	switch {
	case len(origin) == 0:
		return ""
	case len(origin) > 1:
		return "Origin sent twice"
	case !sameOrigin(origin[0], r):
		return "Origin " + quoteShort(origin[0]) + " is not this listener's"
	}
	return ""
}

// uiNavigation reports whether r is a browser's top-level navigation to
// the web UI's files, which hold no data and may be linked to.
func uiNavigation(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document" &&
		(r.URL.Path == strings.TrimSuffix(adminui.Prefix, "/") || strings.HasPrefix(r.URL.Path, adminui.Prefix))
}

// sameOrigin reports whether origin (an Origin header, scheme://host[:port])
// is the origin r was sent to: http (https on TLS) and r's Host, a
// default port written or not.
func sameOrigin(origin string, r *http.Request) bool {
	scheme, port := "http://", "80"
	if r.TLS != nil {
		scheme, port = "https://", "443"
	}
	if len(origin) < len(scheme) || !strings.EqualFold(origin[:len(scheme)], scheme) || r.Host == "" {
		return false
	}
	oh, op, ok := splitDefault(origin[len(scheme):], port)
	if !ok {
		return false
	}
	rh, rp, ok := splitDefault(r.Host, port)
	return ok && op == rp && strings.EqualFold(oh, rh)
}

// splitDefault splits host[:port] with port def when none is written;
// false for anything with a path, user info or an empty host.
func splitDefault(hostport, def string) (host, port string, ok bool) {
	if hostport == "" || strings.ContainsAny(hostport, "/?#@ ") {
		return "", "", false
	}
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		if p == "" {
			p = def
		}
		return h, p, h != ""
	}
	h := hostOnly(hostport)
	return h, def, h != ""
}

// requireJSON refuses a write whose body is not declared JSON (415): a
// write (any method but GET, HEAD and OPTIONS) must carry Content-Type
// application/json (parameters such as charset allowed), or no
// Content-Type and no body (Content-Length 0 or absent, not chunked).
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWrite(r.Method) {
			if why := notJSON(r); why != "" {
				writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type",
					"an admin API write takes Content-Type: application/json (or no body at all); "+why)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// isWrite reports whether method may change something.
func isWrite(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// notJSON returns why r's body is not declared JSON, "" when it is (or
// when there is none and no Content-Type). An empty Content-Type counts
// as none (Go's http.Post(url, "", nil) sends one); a browser cannot
// send it across origins without a preflight.
func notJSON(r *http.Request) string {
	ct := r.Header.Values("Content-Type")
	if len(ct) == 1 && strings.TrimSpace(ct[0]) == "" {
		ct = nil
	}
	switch {
	case len(ct) == 0:
		if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
			return ""
		}
		return "this one has a body and no Content-Type"
	case len(ct) > 1:
		return "this one has Content-Type twice"
	}
	mt, _, err := mime.ParseMediaType(ct[0])
	if err != nil || mt != "application/json" {
		return "got " + quoteShort(ct[0])
	}
	return ""
}

// quoteShort quotes s for a refusal's message, cut to 100 bytes.
func quoteShort(s string) string {
	const max = 100
	if len(s) > max {
		s = s[:max] + "..."
	}
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}
