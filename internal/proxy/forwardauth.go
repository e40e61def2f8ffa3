package proxy

// Forward auth (auth: forward): the route's authorization service
// (package fwdauth) decides each request before any limit, admission slot
// or upstream is spent on it. A 2xx lets it through with the service's
// CopyResponseHeaders set on the request sent upstream (the client's own
// values of those headers are always removed first, so an upstream can
// trust them); a 3xx or 4xx is the client's answer as the service gave it
// (status, bounded body, fwdauth.SafeHeaders); a failure is 503
// auth_unavailable, or a pass with OnErrorAllow; a full MaxInFlight is
// 503 auth_busy whatever OnError says (letting a flood through would make
// the limit a way around the service).

import (
	"net/http"
	"strconv"

	"github.com/levee-gw/levee/internal/fwdauth"
)

// ForwardAuth is a route's authorization service.
type ForwardAuth struct {
	Checker *fwdauth.Checker
	// OnErrorAllow lets a request through when the service fails.
	OnErrorAllow bool
	// CopyResponseHeaders are removed from the client's request, then set
	// from a 2xx answer (canonical).
	CopyResponseHeaders []string
}

// forwardAuth asks rt's service about r. It returns false after writing
// the client's answer.
func (h *Handler) forwardAuth(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route) bool {
	fa := rt.ForwardAuth
	if fa == nil || fa.Checker == nil { // fails closed: a route built without its service
		x.refuseDetail(w, ReasonAuthUnavailable, "unconfigured")
		return false
	}
	for _, k := range fa.CopyResponseHeaders {
		delete(r.Header, k)
	}
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	d := fa.Checker.Check(r.Context(), fwdauth.Request{Method: r.Method, Proto: proto, Host: r.Host, URI: uri,
		ClientIP: clientHost(x.client), Header: r.Header})
	switch {
	case d.Result == fwdauth.ResultAllowed:
		h.consumers.auth.accepted(AuthForward)
		for k, v := range d.Upstream {
			r.Header[k] = v
		}
		return true
	case d.Result == fwdauth.ResultDenied:
		reason := ReasonForbidden
		if d.Status == http.StatusUnauthorized {
			reason = ReasonUnauthenticated
		}
		h.consumers.auth.refused(AuthForward, reason, "denied")
		hd := w.Header()
		for k, v := range d.Header {
			hd[k] = v
		}
		hd["Content-Length"] = []string{strconv.Itoa(len(d.Body))}
		w.WriteHeader(d.Status)
		n, _ := w.Write(d.Body)
		x.status, x.bytesOut = d.Status, int64(n)
		return false
	case d.Result == fwdauth.ResultBusy:
		x.refuse(w, ReasonAuthBusy)
		return false
	case fa.OnErrorAllow:
		fa.Checker.PassedOnError()
		return true
	default:
		if r.Context().Err() != nil {
			x.status = statusClientClosed // the client left while the service was asked
			return false
		}
		x.refuseDetail(w, ReasonAuthUnavailable, d.Result.String())
		return false
	}
}
