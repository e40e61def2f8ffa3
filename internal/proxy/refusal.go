package proxy

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Reason is the stable snake_case code in every refusal levee writes itself.
// Clients and dashboards key on it; never rename one (add new ones instead).
type Reason string

// The reasons the request path can give. Each has exactly one status code
// and one human sentence, kept in refusals below.
const (
	ReasonNoRoute             Reason = "no_route"
	ReasonMethodNotAllowed    Reason = "method_not_allowed"
	ReasonNoAvailableEndpoint Reason = "no_available_endpoint"
	ReasonUpstreamUnavailable Reason = "upstream_unavailable"
	ReasonUpstreamTimeout     Reason = "upstream_timeout"
	ReasonBodyTooLarge        Reason = "body_too_large"
	ReasonHeaderTooLarge      Reason = "header_too_large"
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
	// ReasonConnectionLimit is written by the data listener's connection
	// cap (package netlimit), not by the handler.
	ReasonConnectionLimit Reason = "connection_limit"

	// Admission refusals (package admission and the memory guard): the
	// work was shed before it reached an upstream.
	ReasonConcurrencyLimit Reason = "concurrency_limit"
	ReasonQueueFull        Reason = "queue_full"
	ReasonQueueTimeout     Reason = "queue_timeout"
	ReasonShedPriority     Reason = "shed_priority"
	ReasonConsumerLimit    Reason = "consumer_limit"
	ReasonMemoryPressure   Reason = "memory_pressure"

	// Consumer refusals: who is calling, may they, and how often.
	ReasonUnauthenticated Reason = "unauthenticated"
	ReasonForbidden       Reason = "forbidden"
	ReasonRateLimited     Reason = "rate_limited"
	ReasonQuotaExhausted  Reason = "quota_exhausted"
)

// refusal is a pre-rendered answer: the status, whether it carries
// Retry-After, and the JSON body. Rendering once at start keeps a refusal
// to a couple of header writes and one body write.
type refusal struct {
	status        int
	retryAfter    bool
	body          []byte
	contentLength []string
}

// refusals is read-only after package initialisation.
var refusals = renderRefusals()

func renderRefusals() map[Reason]*refusal {
	refusals := map[Reason]*refusal{}
	add := func(r Reason, status int, retryAfter bool, sentence string) {
		body := []byte(`{"error":` + strconv.Quote(sentence) + `,"reason":"` + string(r) + `"}` + "\n")
		refusals[r] = &refusal{status: status, retryAfter: retryAfter, body: body,
			contentLength: []string{strconv.Itoa(len(body))}}
	}
	add(ReasonNoRoute, http.StatusNotFound, false, "no route matches this host and path")
	add(ReasonMethodNotAllowed, http.StatusMethodNotAllowed, false, "the route does not accept this method")
	add(ReasonNoAvailableEndpoint, http.StatusServiceUnavailable, true, "the upstream has no endpoint available to take this request")
	add(ReasonUpstreamUnavailable, http.StatusBadGateway, false, "the upstream endpoint could not be reached or broke the connection")
	add(ReasonUpstreamTimeout, http.StatusGatewayTimeout, false, "the upstream endpoint did not answer in time")
	add(ReasonBodyTooLarge, http.StatusRequestEntityTooLarge, false, "the request body is larger than this route accepts")
	add(ReasonBadPath, http.StatusBadRequest, false, "the request path is malformed or ambiguous (dot segments with parameters, escaped slashes, invalid escapes or UTF-8, NUL, backslash)")
	add(ReasonBadRequest, http.StatusBadRequest, false, "the request body is malformed or shorter than its framing announced")
	add(ReasonHeaderTooLarge, http.StatusRequestHeaderFieldsTooLarge, false, "the request headers are larger than levee accepts")
	add(ReasonBadHeaderName, http.StatusBadRequest, false, `a request header name contains "_", which levee does not accept`)
	add(ReasonConcurrencyLimit, http.StatusServiceUnavailable, true, "the upstream is at its concurrency limit; retry later")
	add(ReasonQueueFull, http.StatusServiceUnavailable, true, "the upstream's queue is full; retry later")
	add(ReasonQueueTimeout, http.StatusServiceUnavailable, true, "the request waited too long for the upstream; retry later")
	add(ReasonShedPriority, http.StatusServiceUnavailable, true, "the upstream is under pressure and sheds low-priority requests first; retry later")
	add(ReasonConsumerLimit, http.StatusTooManyRequests, true, "this consumer has as many requests in progress as it may; retry later")
	add(ReasonMemoryPressure, http.StatusServiceUnavailable, true, "levee is short of memory and sheds work to stay up; retry later")
	// Rate-limit refusals carry the limiter's exact Retry-After, set by
	// the caller; retryAfter false keeps Refuse from overwriting it.
	add(ReasonRateLimited, http.StatusTooManyRequests, false, "this caller is over its rate limit; retry after the time in Retry-After")
	add(ReasonQuotaExhausted, http.StatusTooManyRequests, false, "this caller has used its quota for the current period; retry after the time in Retry-After")
	add(ReasonUnauthenticated, http.StatusUnauthorized, false, "the request does not carry valid credentials of an active app")
	add(ReasonForbidden, http.StatusForbidden, false, "this app may not call this route")
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
	rf := refusals[reason]
	if rf == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":"internal error","reason":"internal"}` + "\n"))
		return http.StatusInternalServerError
	}
	if rf.retryAfter {
		w.Header()["Retry-After"] = retryAfterValue
	}
	return rf.write(w)
}

// write sends the rendered refusal: its headers, status and body.
func (rf *refusal) write(w http.ResponseWriter) int {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["X-Content-Type-Options"] = noSniff
	h["Content-Length"] = rf.contentLength
	w.WriteHeader(rf.status)
	_, _ = w.Write(rf.body)
	return rf.status
}

// RefuseRetryAfter is Refuse with a Retry-After of d (rounded up to whole
// seconds, at least 1) instead of the default, so refused clients do not
// come back in lockstep.
func RefuseRetryAfter(w http.ResponseWriter, reason Reason, d time.Duration) int {
	if rf := refusals[reason]; rf != nil && rf.retryAfter && d > 0 {
		secs := (d + time.Second - 1) / time.Second
		w.Header()["Retry-After"] = []string{strconv.FormatInt(int64(max(secs, 1)), 10)}
		return rf.write(w)
	}
	return Refuse(w, reason)
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
	if detail == "" {
		return Refuse(w, reason)
	}
	k := detailKey{reason, detail}
	v, ok := detailBodies.Load(k)
	if !ok {
		base := refusals[reason]
		if base == nil {
			return Refuse(w, reason)
		}
		body := append(bytes.TrimSuffix(bytes.Clone(base.body), []byte("}\n")), `,"detail":`+strconv.Quote(detail)+"}\n"...)
		v, _ = detailBodies.LoadOrStore(k, &refusal{status: base.status, retryAfter: base.retryAfter, body: body,
			contentLength: []string{strconv.Itoa(len(body))}})
	}
	return v.(*refusal).write(w)
}

// StatusOf returns the HTTP status a reason is answered with (0 if unknown).
func StatusOf(reason Reason) int {
	if rf := refusals[reason]; rf != nil {
		return rf.status
	}
	return 0
}
