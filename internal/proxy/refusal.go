package proxy

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/telemetry"
)

// Reason is the stable snake_case code in every refusal levee writes itself.
// Clients and dashboards key on it; never rename one (add new ones instead).
type Reason string

// The reasons levee can give. Each has one row in reasonTable
// (reasons.go): its status, Retry-After, sentence and documentation.
const (
	ReasonNoRoute             Reason = "no_route"
	ReasonMethodNotAllowed    Reason = "method_not_allowed"
	ReasonNoAvailableEndpoint Reason = "no_available_endpoint"
	ReasonUpstreamUnavailable Reason = "upstream_unavailable"
	ReasonUpstreamTimeout     Reason = "upstream_timeout"
	// ReasonUpstreamTLS: the TLS handshake with an endpoint failed; the
	// refusal's detail is upstream's fixed set (upstream.TLSFailure).
	ReasonUpstreamTLS    Reason = "upstream_tls"
	ReasonBodyTooLarge   Reason = "body_too_large"
	ReasonHeaderTooLarge Reason = "header_too_large"
	// ReasonBadPath: the request target's path is malformed or could be
	// read two ways (see paths.go).
	ReasonBadPath Reason = "bad_path"
	// ReasonBadHeaderName: a header name holds "_" and
	// server.underscores_in_headers is reject.
	ReasonBadHeaderName Reason = "bad_header_name"
	// ReasonBadRequest: the client's request body was malformed or shorter
	// than announced (bad chunked framing, a Content-Length it did not
	// fill). The client's fault: never an endpoint's failure.
	ReasonBadRequest Reason = "bad_request"
	// ReasonBodyTimeout: the client's request body stopped arriving for
	// longer than server.body_timeout between two reads. The client's
	// fault: never an endpoint's failure.
	ReasonBodyTimeout Reason = "body_timeout"
	// ReasonConnectionLimit is written by the data listener's connection
	// cap (package netlimit), not by the handler.
	ReasonConnectionLimit Reason = "connection_limit"

	// Admission refusals (package admission, whose names these are, and
	// the memory guard): the work was shed before it reached an upstream.
	ReasonConcurrencyLimit Reason = Reason(admission.ReasonConcurrencyLimit)
	ReasonQueueFull        Reason = Reason(admission.ReasonQueueFull)
	ReasonQueueTimeout     Reason = Reason(admission.ReasonQueueTimeout)
	ReasonShedPriority     Reason = Reason(admission.ReasonShedPriority)
	ReasonConsumerLimit    Reason = Reason(admission.ReasonConsumerLimit)
	ReasonMemoryPressure   Reason = "memory_pressure"

	// Data-API refusals: package dataquery declares them (dataquery.Reasons)
	// and their rows below derive from its declarations (dataRow).
	ReasonMissingParameter   Reason = dataquery.ReasonMissingParameter
	ReasonInvalidParameter   Reason = dataquery.ReasonInvalidParameter
	ReasonUnknownParameter   Reason = dataquery.ReasonUnknownParameter
	ReasonDuplicateParameter Reason = dataquery.ReasonDuplicateParameter
	ReasonOperatorNotAllowed Reason = dataquery.ReasonOperatorNotAllowed
	ReasonInvalidCursor      Reason = dataquery.ReasonInvalidCursor
	ReasonInvalidLimit       Reason = dataquery.ReasonInvalidLimit
	ReasonNotAcceptable      Reason = dataquery.ReasonNotAcceptable
	ReasonStatementTimeout   Reason = dataquery.ReasonStatementTimeout
	ReasonDataSourceDown     Reason = dataquery.ReasonSourceUnavailable
	ReasonDBPoolExhausted    Reason = dataquery.ReasonPoolExhausted
	ReasonQueryFailed        Reason = dataquery.ReasonQueryFailed
	ReasonNotFound           Reason = dataquery.ReasonNotFound
	// A data route's value bound to the caller's identity (`from:`).
	ReasonIdentityClaimMissing Reason = dataquery.ReasonIdentityClaimMissing
	ReasonIdentityClaimInvalid Reason = dataquery.ReasonIdentityClaimInvalid

	// reasonInternal answers a bug: a reason without a row (Refuse).
	reasonInternal Reason = "internal"

	// Consumer refusals: who is calling, may they, and how often.
	ReasonUnauthenticated Reason = "unauthenticated"
	ReasonForbidden       Reason = "forbidden"
	// Forward auth (auth: forward): the authorization service failed
	// (on_error: deny), or its max_in_flight calls were under way.
	ReasonAuthUnavailable Reason = "auth_unavailable"
	ReasonAuthBusy        Reason = "auth_busy"
	// ReasonAddressDenied: the client address is outside the route's
	// access.allow or inside its access.deny (access.go).
	ReasonAddressDenied Reason = "address_denied"
	// ReasonAuthFailures: the client address failed basic auth too often
	// in the current window (basic.go); refused without checking.
	ReasonAuthFailures   Reason = "auth_failures"
	ReasonRateLimited    Reason = "rate_limited"
	ReasonQuotaExhausted Reason = "quota_exhausted"
)

// retryAfterKind says whether and how a refusal carries Retry-After.
type retryAfterKind uint8

const (
	// noRetryAfter: none; the client must change its request (or its
	// credentials) first.
	noRetryAfter retryAfterKind = iota
	// retryAfterSoon: Refuse sets 1 s; RefuseRetryAfter sets the caller's
	// value instead (admission control's jittered one).
	retryAfterSoon
	// retryAfterCaller: the caller sets the exact value (the rate
	// limiter's, ratelimit.Decision.SetHeaders); Refuse adds none, so it
	// never overwrites it.
	retryAfterCaller
)

// reasonSpec is one reason's row in reasonTable: everything levee says
// about it on the wire, in its metrics and in its documentation.
type reasonSpec struct {
	Reason Reason
	// Status is the HTTP status the reason is answered with.
	Status int
	// AltStatus is a second status the reason is answered with, 0 if none
	// (connection_limit: 429 from the per-address cap).
	AltStatus  int
	RetryAfter retryAfterKind
	// Shed: admission control or the memory guard turned the work away
	// before it reached an upstream; counted in levee_shed_total as well
	// as levee_refusals_total.
	Shed bool
	// Listener: written by the data listener's connection cap (package
	// netlimit, which imports nothing of levee's) before any request is
	// read, never by Refuse. TestListenerRefusalsMatchTable holds netlimit
	// to this row.
	Listener bool
	// Sentence is the "error" member of the JSON body: what happened, for
	// the person reading a client's log.
	Sentence string
	// When is the documentation's "when" column (Markdown): the condition
	// and the settings behind it.
	When string
}

// reasonTable is the one list of refusal reasons. Refuse's rendered
// answers, the metrics' cached label sets and levee_shed_total's help, the
// refusal tests and the refusal tables in README.md and
// docs/configuration.md (TestRefusalTablesInDocs) all derive from it.
// Order is the documentation's. Add a reason here and nowhere else by hand
// (a data reason: in dataquery's list, and its dataRow here; one left
// out is still answered, see renderRefusals, but TestEveryDataReasonHasRefusal
// fails until it has its place).
var reasonTable = [...]reasonSpec{
	{Reason: ReasonBadPath, Status: http.StatusBadRequest,
		Sentence: "the request path is malformed or ambiguous (dot segments with parameters, escaped slashes, invalid escapes or UTF-8, NUL, backslash)",
		When:     "the request path is malformed or could be read two ways (NUL, invalid escapes or UTF-8, `\\`, `#`, `/..;/`, `%2F` under `server.paths.escaped_slashes: reject`): see Request paths in docs/configuration.md"},
	{Reason: ReasonBadRequest, Status: http.StatusBadRequest,
		Sentence: "the request body is malformed or shorter than its framing announced",
		When:     "the request body is malformed or shorter than its `Content-Length` (the client's fault; never counted against an endpoint)"},
	{Reason: ReasonBadHeaderName, Status: http.StatusBadRequest,
		Sentence: `a request header name contains "_", which levee does not accept`,
		When:     "a request header name holds `_` and `server.underscores_in_headers` is `reject`"},
	dataRow(ReasonMissingParameter),
	dataRow(ReasonInvalidParameter),
	dataRow(ReasonUnknownParameter),
	dataRow(ReasonDuplicateParameter),
	dataRow(ReasonOperatorNotAllowed),
	dataRow(ReasonInvalidCursor),
	dataRow(ReasonInvalidLimit),
	dataRow(ReasonNotFound),
	dataRow(ReasonNotAcceptable),
	{Reason: ReasonUnauthenticated, Status: http.StatusUnauthorized,
		Sentence: "the request does not carry valid credentials of an active app",
		When:     "a route with `auth` and no valid credentials (`WWW-Authenticate`, a `detail`)"},
	{Reason: ReasonForbidden, Status: http.StatusForbidden,
		Sentence: "this app may not call this route",
		When:     "the app is known but suspended or not granted the route (`detail`)"},
	{Reason: ReasonAuthUnavailable, Status: http.StatusServiceUnavailable, RetryAfter: retryAfterSoon,
		Sentence: "the authorization service did not answer; retry later",
		When:     "a route with `auth: forward` whose service timed out, was unreachable or answered 5xx, with `on_error: deny` (`detail`: timeout, unreachable, bad_answer)"},
	{Reason: ReasonAuthBusy, Status: http.StatusServiceUnavailable, RetryAfter: retryAfterSoon,
		Sentence: "the authorization service has too many calls under way; retry later",
		When:     "a route with `auth: forward` whose `forward_auth.max_in_flight` calls are all under way"},
	{Reason: ReasonAddressDenied, Status: http.StatusForbidden,
		Sentence: "this client address may not call this route",
		When:     "the real client address (after `server.proxy_protocol` and `server.trusted_proxies`) is in the route's `access.deny` (or `server.access.deny`), or not in a non-empty `access.allow`; checked before any credential"},
	dataRow(ReasonIdentityClaimMissing),
	dataRow(ReasonIdentityClaimInvalid),
	{Reason: ReasonNoRoute, Status: http.StatusNotFound,
		Sentence: "no route matches this host and path",
		When:     "no route matches host and path"},
	{Reason: ReasonMethodNotAllowed, Status: http.StatusMethodNotAllowed,
		Sentence: "the route does not accept this method",
		When:     "a route matches host and path but not the method (`Allow` lists the methods that would be served)"},
	{Reason: ReasonBodyTimeout, Status: http.StatusRequestTimeout,
		Sentence: "the request body stopped arriving before it was complete",
		When:     "no byte of the request body arrived for `server.body_timeout` (the client's fault; never counted against an endpoint; the upstream request, if any, is cancelled)"},
	{Reason: ReasonBodyTooLarge, Status: http.StatusRequestEntityTooLarge,
		Sentence: "the request body is larger than this route accepts",
		When:     "the body exceeds the route's `max_body_bytes`"},
	{Reason: ReasonHeaderTooLarge, Status: http.StatusRequestHeaderFieldsTooLarge,
		Sentence: "the request headers are larger than levee accepts",
		When:     "request line + headers exceed `server.max_header_bytes`"},
	{Reason: ReasonUpstreamUnavailable, Status: http.StatusBadGateway,
		Sentence: "the upstream endpoint could not be reached or broke the connection",
		When:     "the endpoint refused or broke the connection (and no retry was allowed)"},
	{Reason: ReasonUpstreamTLS, Status: http.StatusBadGateway,
		Sentence: "the TLS handshake with the upstream endpoint failed",
		When:     "the TLS handshake with an endpoint of an upstream with `tls` failed (and no retry was allowed); `detail` is `unknown_authority`, `name_mismatch`, `expired` or `handshake_failure`"},
	{Reason: ReasonUpstreamTimeout, Status: http.StatusGatewayTimeout,
		Sentence: "the upstream endpoint did not answer in time",
		When:     "connect or response-header timeout"},
	dataRow(ReasonQueryFailed),
	dataRow(ReasonStatementTimeout),
	dataRow(ReasonDataSourceDown),
	dataRow(ReasonDBPoolExhausted),
	{Reason: ReasonNoAvailableEndpoint, Status: http.StatusServiceUnavailable, RetryAfter: retryAfterSoon,
		Sentence: "the upstream has no endpoint available to take this request",
		When:     "every endpoint of the upstream is drained"},
	{Reason: ReasonConnectionLimit, Status: http.StatusServiceUnavailable, AltStatus: http.StatusTooManyRequests,
		RetryAfter: retryAfterSoon, Listener: true,
		Sentence: "levee holds as many connections as it is allowed",
		When:     "`server.max_connections` (503) or `max_connections_per_ip` (429) connections are already open; the connection is closed"},
	{Reason: ReasonConcurrencyLimit, Status: http.StatusServiceUnavailable, RetryAfter: retryAfterSoon, Shed: true,
		Sentence: "the upstream is at its concurrency limit; retry later",
		When:     "the upstream is at its limit and there is no queue (`max_queue: 0`)"},
	{Reason: ReasonQueueFull, Status: http.StatusServiceUnavailable, RetryAfter: retryAfterSoon, Shed: true,
		Sentence: "the upstream's queue is full; retry later",
		When:     "the queue is full (or the consumer's share of it is)"},
	{Reason: ReasonQueueTimeout, Status: http.StatusServiceUnavailable, RetryAfter: retryAfterSoon, Shed: true,
		Sentence: "the request waited too long for the upstream; retry later",
		When:     "the request waited `queue_timeout` without getting a slot"},
	{Reason: ReasonShedPriority, Status: http.StatusServiceUnavailable, RetryAfter: retryAfterSoon, Shed: true,
		Sentence: "the upstream is under pressure and sheds low-priority requests first; retry later",
		When:     "the request was refused to make room for more important ones"},
	{Reason: ReasonConsumerLimit, Status: http.StatusTooManyRequests, RetryAfter: retryAfterSoon, Shed: true,
		Sentence: "this consumer has as many requests in progress as it may; retry later",
		When:     "the consumer already has `max_per_consumer` requests in flight"},
	{Reason: ReasonMemoryPressure, Status: http.StatusServiceUnavailable, RetryAfter: retryAfterSoon, Shed: true,
		Sentence: "levee is short of memory and sheds work to stay up; retry later",
		When:     "the live heap plus reserved bodies is above a watermark the request's priority does not pass, or the memory budget has no room for a body the request must buffer (a sheddable request's replay copy, a signed request's body)"},
	{Reason: ReasonAuthFailures, Status: http.StatusTooManyRequests, RetryAfter: retryAfterCaller,
		Sentence: "too many failed basic-auth attempts from this address; retry after the time in Retry-After",
		When:     "a client address failed `auth: basic` 10 times within a minute: refused until the minute ends, without checking its password"},
	{Reason: ReasonRateLimited, Status: http.StatusTooManyRequests, RetryAfter: retryAfterCaller,
		Sentence: "this caller is over its rate limit; retry after the time in Retry-After",
		When:     "an app or client address is over its rate limit"},
	{Reason: ReasonQuotaExhausted, Status: http.StatusTooManyRequests, RetryAfter: retryAfterCaller,
		Sentence: "this caller has used its quota for the current period; retry after the time in Retry-After",
		When:     "an app or client address has used its quota for the period"},
}

// refusal is a pre-rendered answer: the status, whether it carries
// Retry-After, and the JSON body. Rendering once at start keeps a refusal
// to a couple of header writes and one body write.
type refusal struct {
	status        int
	retryAfter    bool
	body          []byte
	contentLength []string
	// grpc is the refusal to a gRPC request (grpc.go).
	grpc grpcAnswer
}

// refusals is read-only after package initialisation.
var refusals = renderRefusals()

// renderRefusals renders every row of reasonTable that Refuse writes (all
// but the listener's), and the row of any data reason not placed in it.
func renderRefusals() map[Reason]*refusal {
	refusals := make(map[Reason]*refusal, len(reasonTable))
	for _, s := range allRows() {
		if s.Listener {
			continue
		}
		body := []byte(`{"error":` + strconv.Quote(s.Sentence) + `,"reason":"` + string(s.Reason) + `"}` + "\n")
		refusals[s.Reason] = &refusal{status: s.Status, retryAfter: s.RetryAfter == retryAfterSoon, body: body,
			contentLength: []string{strconv.Itoa(len(body))}, grpc: grpcAnswerOf(s.Reason, s.Status, s.Sentence)}
	}
	return refusals
}

// retryAfterSeconds is the Retry-After value on refusals that carry one.
// One second: a short, honest "come back soon" (later admission control
// issues jitter it).
const retryAfterSeconds = "1"

var (
	jsonContentType = []string{"application/json"}
	retryAfterValue = []string{retryAfterSeconds}
	noSniff         = []string{"nosniff"}
)

// Refuse writes levee's own refusal for reason and returns its status. It is
// the one place that maps a Reason to HTTP. An unknown reason is a
// programming error and is answered as 500 with reason "internal".
func Refuse(w http.ResponseWriter, reason Reason) int {
	status, _ := refuseN(w, reason)
	return status
}

// The *N forms of the Refuse functions also return the body bytes
// written, for the access log's bytes_out.

func refuseN(w http.ResponseWriter, reason Reason) (int, int64) {
	rf := refusals[reason]
	if rf == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		n, _ := w.Write([]byte(`{"error":"internal error","reason":"internal"}` + "\n"))
		return http.StatusInternalServerError, int64(n)
	}
	if rf.retryAfter {
		w.Header()["Retry-After"] = retryAfterValue
	}
	return rf.write(w)
}

// write sends the rendered refusal: its headers, status and body. It
// returns the status and the body bytes written.
func (rf *refusal) write(w http.ResponseWriter) (int, int64) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["X-Content-Type-Options"] = noSniff
	h["Content-Length"] = rf.contentLength
	w.WriteHeader(rf.status)
	n, _ := w.Write(rf.body)
	return rf.status, int64(n)
}

// RefuseRetryAfter is Refuse with a Retry-After of d (rounded up to whole
// seconds, at least 1) instead of the default, so refused clients do not
// come back in lockstep.
func RefuseRetryAfter(w http.ResponseWriter, reason Reason, d time.Duration) int {
	status, _ := refuseRetryAfterN(w, reason, d)
	return status
}

func refuseRetryAfterN(w http.ResponseWriter, reason Reason, d time.Duration) (int, int64) {
	if rf := refusals[reason]; rf != nil && rf.retryAfter && d > 0 {
		w.Header()["Retry-After"] = retryAfterIn(d)
		return rf.write(w)
	}
	return refuseN(w, reason)
}

// retryAfterIn is a Retry-After of d: whole seconds, rounded up, at
// least 1.
func retryAfterIn(d time.Duration) []string {
	secs := (d + time.Second - 1) / time.Second
	return []string{strconv.FormatInt(int64(max(secs, 1)), 10)}
}

// detailBodies are the bodies of refusals with a detail (the auth reasons,
// "suspended", "no_grant"), rendered on first use; a detail is one of a
// small fixed set, so the cache is bounded by it.
var detailBodies sync.Map // detailKey → *refusal

type detailKey struct {
	reason Reason
	detail string
}

// RefuseDetail is Refuse with a "detail" member in the JSON body that says
// more precisely what was wrong (for a 401: which credential check
// failed). detail must come from a fixed set of codes, never from the
// request.
func RefuseDetail(w http.ResponseWriter, reason Reason, detail string) int {
	status, _ := refuseDetailN(w, reason, detail)
	return status
}

func refuseDetailN(w http.ResponseWriter, reason Reason, detail string) (int, int64) {
	if detail == "" {
		return refuseN(w, reason)
	}
	k := detailKey{reason, detail}
	v, ok := detailBodies.Load(k)
	if !ok {
		base := refusals[reason]
		if base == nil {
			return refuseN(w, reason)
		}
		body := append(bytes.TrimSuffix(bytes.Clone(base.body), []byte("}\n")), `,"detail":`+strconv.Quote(detail)+"}\n"...)
		v, _ = detailBodies.LoadOrStore(k, &refusal{status: base.status, retryAfter: base.retryAfter, body: body,
			contentLength: []string{strconv.Itoa(len(body))}})
	}
	return v.(*refusal).write(w)
}

// refuseParamN is refuseN with the parameter at fault and a detail in the
// JSON body ({"error","reason","parameter","detail"}), and a Retry-After
// of retryAfter when the reason carries one and it is > 0; it returns the
// status and the bytes written. Unlike RefuseDetail it renders each answer
// anew: param and detail may quote a (clipped) part of the request, so
// they must not fill a cache. Either may be empty, and is then left out.
func refuseParamN(w http.ResponseWriter, reason Reason, param, detail string, retryAfter time.Duration) (int, int64) {
	base := refusals[reason]
	if base == nil || (param == "" && detail == "") {
		if retryAfter > 0 {
			return refuseRetryAfterN(w, reason, retryAfter)
		}
		return refuseN(w, reason)
	}
	body := bytes.TrimSuffix(bytes.Clone(base.body), []byte("}\n"))
	if param != "" {
		body = append(body, `,"parameter":`...)
		body = telemetry.AppendJSONString(body, param)
	}
	if detail != "" {
		body = append(body, `,"detail":`...)
		body = telemetry.AppendJSONString(body, detail)
	}
	body = append(body, "}\n"...)
	if base.retryAfter {
		w.Header()["Retry-After"] = retryAfterIn(retryAfter) // 1 s when retryAfter is 0
	}
	rf := refusal{status: base.status, body: body, contentLength: []string{strconv.Itoa(len(body))}}
	return rf.write(w)
}

// StatusOf returns the HTTP status a reason is answered with (0 if unknown).
func StatusOf(reason Reason) int {
	if rf := refusals[reason]; rf != nil {
		return rf.status
	}
	return 0
}
