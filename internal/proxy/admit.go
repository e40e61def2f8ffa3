package proxy

// The admission steps of a request, in the order ServeHTTP takes them.
// Each either passes the request on (true) or answers it through the
// exchange's refusals (exchange.go) and stops it (false):
//
//  1. admitFraming: the request line and headers (size, names), the
//     route and the method, the body's declared length;
//  2. prepareBody: the body's limit and timeout, the protocol-switch and
//     trailer screens, levee's own app header removed;
//  3. admitConsumer: identity, grant, rate limits and quotas, the app's
//     concurrency (routes with auth or an anonymous limit only);
//  4. admitMemory: memory pressure by the priority (computed once, before
//     the steps), and a small body read whole before admission;
//  5. admitUpstream: the upstream's admission limit (a slot, or a queue);
//  6. pickFirst: the first attempt's endpoint.
//
// What a step takes (an app's concurrency slot, the admission slot, the
// memory reserved) is given back by finish, however the request ends.

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/auth"
	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/jwtauth"
	"github.com/levee-gw/levee/internal/ratelimit"
)

// admitFraming is step 1: it refuses a request whose headers are too
// large or badly named, whose path is malformed, that matches no route or
// no method of one, or whose declared body is over the route's limit. It
// returns the route and the path as sent (for a signature; paths.go).
func (h *Handler) admitFraming(w http.ResponseWriter, r *http.Request, x *exchange, t *Table) (rt *Route, sentPath string, ok bool) {
	if h.maxHeader > 0 && headerSize(r) > h.maxHeader {
		x.refuse(w, ReasonHeaderTooLarge)
		return nil, "", false
	}
	if !h.screenHeaders(r.Header) {
		x.refuse(w, ReasonBadHeaderName)
		return nil, "", false
	}
	rt, matched, allow, badPath, sentPath := t.routeRequest(r)
	if !badPath && r.Method == http.MethodOptions && h.preflight(w, r, x, t) { // CORS (cors.go)
		return nil, "", false
	}
	switch {
	case badPath:
		x.refuse(w, ReasonBadPath)
		return nil, "", false
	case matched && r.Method == http.MethodConnect && !connectAllowed(rt, matched):
		w.Header()["Allow"] = allowAllButConnect
		x.refuse(w, ReasonMethodNotAllowed)
		return nil, "", false
	case !matched && allow != nil:
		w.Header()["Allow"] = allow // built with the table (RFC 9110 section 15.5.6)
		x.refuse(w, ReasonMethodNotAllowed)
		return nil, "", false
	case !matched:
		x.refuse(w, ReasonNoRoute)
		return nil, "", false
	}
	x.route = rt
	if rt.CORS != nil {
		rt.CORS.answer(w.Header(), r) // on levee's refusals too (cors.go)
	}
	if rt.MaxBodyBytes > 0 && r.ContentLength > rt.MaxBodyBytes {
		x.refuse(w, ReasonBodyTooLarge)
		return nil, "", false
	}
	return rt, sentPath, true
}

// headerSize counts the request line and headers as they were on the wire
// (HTTP/1 framing; HTTP/2 requests are counted the same way).
func headerSize(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for k, vv := range r.Header {
		for _, v := range vv {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// prepareBody is step 2: the body is bounded by the route's limit and
// watched for its timeout and its client's errors (clientbody.go), the
// protocol switches and trailers the route does not allow are dropped,
// and only levee names the app to an upstream or marks a request as a
// mirror's copy (a client's Levee-App and Levee-Mirror never reach one).
func prepareBody(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route) {
	if rt.MaxBodyBytes > 0 && r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, rt.MaxBodyBytes)
	}
	x.body = watchClientBody(w, r, rt.BodyTimeout) // nil without a body
	screenUpgrade(r.Header, rt.Upgrades)
	screenTrailers(r, rt.ForwardTrailers)
	delete(r.Header, AppHeader)
	delete(r.Header, MirrorHeader)
}

// admitConsumer is step 3, on a route with auth or an anonymous limit:
// the caller's identity, grant and limits (authorize), then one of its
// app's MaxConcurrency slots (finish gives it back).
func (h *Handler) admitConsumer(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route, sentPath string) bool {
	if rt.Auth == AuthNone && rt.AnonymousLimit == (ratelimit.Policy{}) {
		return true
	}
	x.sentPath = sentPath
	if !h.authorize(w, r, x, rt) {
		return false
	}
	if x.app == nil || x.app.MaxConcurrency <= 0 {
		return true
	}
	if x.app.counters.inflight.Add(1) > int64(x.app.MaxConcurrency) {
		x.app.counters.inflight.Add(-1)
		x.shed(w, ReasonConsumerLimit, consumerRetryAfter)
		return false
	}
	x.appSlot = true
	return true
}

// admitMemory is step 4: under memory pressure, work of x.prio is shed
// (memory.go); a body of known length within the route's BufferBodyBytes
// is then read whole, before admission: a body that stalls holds its
// connection and its memory, never a slot or an upstream request.
func (h *Handler) admitMemory(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route) bool {
	if h.memory.sheds(x.prio) {
		x.shed(w, ReasonMemoryPressure, 0)
		return false
	}
	if x.body != nil && r.Body == x.body && r.ContentLength > 0 && r.ContentLength <= rt.BufferBodyBytes {
		return h.memory.bufferBody(w, r, x)
	}
	return true
}

// admitUpstream is step 5: a slot of the upstream's admission limit for
// the consumer (the app, else the client address) at x.prio, waited for
// in its queue; finish releases it (or respond, earlier).
func admitUpstream(w http.ResponseWriter, r *http.Request, x *exchange, up *Upstream) bool {
	if up.Admission == nil {
		return true
	}
	consumer := ""
	if x.app != nil {
		consumer = x.app.ID
	} else {
		consumer = clientHost(x.client)
	}
	rel, err := up.Admission.Acquire(r.Context(), consumer, x.prio)
	if err != nil {
		if ref := admissionRefusal(err); ref != nil {
			x.shed(w, Reason(ref.Reason), ref.RetryAfter)
		} else {
			x.status = statusClientClosed // the client left while queued
		}
		return false
	}
	x.rel, x.admitted = rel, true
	return true
}

// admissionRefusal is err's admission refusal, nil when the wait ended
// otherwise (the client left). Only on the refused path: its target is on
// the heap.
func admissionRefusal(err error) *admission.Refusal {
	var ref *admission.Refusal
	if errors.As(err, &ref) {
		return ref
	}
	return nil
}

// pickFirst is step 6: the first attempt's endpoint from the upstream's
// picker; without one the request is refused 503 no_available_endpoint.
func (h *Handler) pickFirst(w http.ResponseWriter, r *http.Request, x *exchange, up *Upstream, bal *Balance) (*endpoint.Endpoint, bool) {
	ep, err := pick(bal, r, x.client)
	if err != nil {
		if !errors.Is(err, balance.ErrNoEndpoint) {
			h.logger.Error("picker failed", "upstream", up.Name, "error", err)
		}
		x.refuse(w, ReasonNoAvailableEndpoint)
		return nil, false
	}
	return ep, true
}

// consumerRetryAfter is the Retry-After of a per-app concurrency refusal:
// a slot frees as soon as one of the app's own requests ends.
const consumerRetryAfter = time.Second

// authorize authenticates the caller of a route with auth, checks its
// grant and applies the rate limits of the app, or of the client address
// on an anonymous route with AnonymousLimit. It sets x.app, the RateLimit
// headers on every answer of a limited route, the app header upstream, and
// removes the caller's levee credentials from what the upstream sees. It
// returns false after writing a refusal.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route) bool {
	now := time.Now()
	var sig *[32]byte // a verified signature's MAC, for a shared replay check
	if rt.Auth == AuthForward {
		if !h.forwardAuth(w, r, x, rt) {
			return false
		}
	} else if rt.Auth != AuthNone {
		app, reason, detail := h.identify(r, x, rt, h.consumers.apps.Load(), now)
		if app == nil {
			h.consumers.auth.refused(rt.Auth, reason, detail)
			if reason == ReasonMemoryPressure {
				x.shed(w, reason, 0)
				return false
			}
			if reason == ReasonAuthFailures {
				setBasicRetryAfter(w, h.consumers.basic, x.client, now)
			}
			if reason == ReasonUnauthenticated {
				w.Header()["Www-Authenticate"] = challenge(rt.Auth, detail)
			}
			x.refuseDetail(w, reason, detail)
			return false
		}
		x.app = app
		h.consumers.auth.accepted(rt.Auth)
		if h.consumers.shared != nil && rt.Auth == AuthHMAC {
			sig = signatureMAC(r.Header)
		}
		if rt.Auth != AuthClientCert { // its credential is the connection's, not a header
			delete(r.Header, "X-Api-Key")
			delete(r.Header, "Authorization")
		}
		r.Header[AppHeader] = app.header
	}
	if x.subject != "" && !h.limitSubject(w, r, x, now) {
		return false
	}
	var d ratelimit.Decision
	var limited bool
	if h.consumers.shared != nil {
		var replayed bool
		if d, limited, replayed = h.limitShared(r, x.client, rt, x.app, sig, now); replayed {
			h.consumers.auth.refused(rt.Auth, ReasonUnauthenticated, string(auth.ReasonReplayed))
			w.Header()["Www-Authenticate"] = challenge(rt.Auth, string(auth.ReasonReplayed))
			x.refuseDetail(w, ReasonUnauthenticated, string(auth.ReasonReplayed))
			return false
		}
	} else {
		d, limited = h.limit(x.client, rt, x.app, now)
	}
	if !limited {
		return true
	}
	d.SetHeaders(w.Header())
	if !d.Allowed {
		reason := ReasonRateLimited
		if d.Quota {
			reason = ReasonQuotaExhausted
		}
		x.refuse(w, reason)
		return false
	}
	if x.app != nil {
		return h.meterUsage(w, x, rt, now)
	}
	return true
}

// meterUsage gives the request of an app whose quota counts rows or bytes
// its meter (usage.go). A shared limiter's decision does not see those
// counts, so an app that used them up is refused here.
func (h *Handler) meterUsage(w http.ResponseWriter, x *exchange, rt *Route, now time.Time) bool {
	if x.usage = h.newUsageMeter(rt, x.app, now); x.usage == nil || h.consumers.shared == nil {
		return true
	}
	out, wait, ok := false, time.Duration(0), false
	if x.usage.shared != nil {
		out, wait, ok = x.usage.exhaustedShared(now)
	}
	if !ok {
		x.usage.shared = nil // Redis away: this node's own counts
		out, wait = x.usage.exhausted(now)
	}
	if out {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		x.usage = nil
		x.refuse(w, ReasonQuotaExhausted)
		return false
	}
	return true
}

var (
	bearerChallenge = []string{`Bearer realm="levee"`}
	hmacChallenge   = []string{auth.SignatureScheme + ` realm="levee"`}
	jwtChallenge    = []string{`Bearer realm="levee", error="invalid_token"`}
)

// challenge is the WWW-Authenticate value a 401 on a route with mode
// carries (RFC 9110 section 11.6.1). A JWT route's names the error
// invalid_token only when a token was sent: RFC 6750 section 3.1 leaves
// the error out of the answer to a request without one.
func challenge(mode AuthMode, detail string) []string {
	switch mode {
	case AuthHMAC:
		return hmacChallenge
	case AuthBasic:
		return basicChallenge
	case AuthClientCert:
		return clientCertChallenge
	case AuthJWT:
		if detail == string(jwtauth.DetailMissing) {
			return bearerChallenge
		}
		return jwtChallenge
	}
	return bearerChallenge
}

// isClientRetry reports whether the client marked the request as a retry
// (Levee-Attempt above 1, as the levee client package sends).
func isClientRetry(h http.Header) bool {
	v := h["Levee-Attempt"]
	return len(v) > 0 && v[0] != "" && v[0] != "1"
}

// clientHost is the client address without its port (clientaddr.go's
// client may carry one or not): an anonymous caller's consumer key for
// fair queueing, and the key of a consistent hash on client_ip.
func clientHost(client string) string {
	host, _, err := net.SplitHostPort(client)
	if err != nil {
		return client
	}
	return host
}
