package proxy

import "github.com/levee-gw/levee/internal/dataquery"

// This file exports the refusal table for readers outside the request
// path (the OpenAPI document): each reason's row as Refuse answers it
// (LookupRefusal), and the rows of the reasons a route of a given shape
// can give (RouteRefusals). It also derives the data
// reasons' rows from package dataquery's declarations.

// RefusalRow is one reason as Refuse answers it.
type RefusalRow struct {
	Reason Reason
	// Status is the HTTP status it is answered with.
	Status int
	// Sentence is the body's "error".
	Sentence string
	// RetryAfter is true when the answer carries Retry-After (Refuse's
	// own, or the rate limiter's for rate_limited and quota_exhausted).
	RetryAfter bool
}

// dataRow is data reason r's row in reasonTable, from dataquery's
// declaration. A reason dataquery does not declare is a programming error
// caught at start (every test of the package fails).
func dataRow(r Reason) reasonSpec {
	d, ok := dataquery.LookupReason(string(r))
	if !ok {
		panic("proxy: " + string(r) + " is not a reason dataquery declares")
	}
	return dataSpec(d)
}

func dataSpec(d dataquery.ReasonSpec) reasonSpec {
	s := reasonSpec{Reason: Reason(d.Reason), Status: d.Status, Shed: d.Shed, Sentence: d.Sentence, When: d.When}
	if d.RetryAfter {
		s.RetryAfter = retryAfterSoon
	}
	return s
}

// allRows is reasonTable followed by the row of each data reason it does
// not place (none while TestEveryDataReasonHasRefusal passes): so a data
// reason is never answered 500 internal.
func allRows() []reasonSpec {
	rows := append([]reasonSpec(nil), reasonTable[:]...)
	for _, d := range dataquery.Reasons() {
		if _, ok := reasonIndex[Reason(d.Reason)]; !ok {
			rows = append(rows, dataSpec(d))
		}
	}
	return rows
}

// row returns reason's row as Refuse answers it.
func row(s reasonSpec) RefusalRow {
	return RefusalRow{Reason: s.Reason, Status: s.Status, Sentence: s.Sentence, RetryAfter: s.RetryAfter != noRetryAfter}
}

// LookupRefusal returns reason's row; ok is false for a reason Refuse has
// no row for (it answers it 500 internal).
func LookupRefusal(reason Reason) (RefusalRow, bool) {
	for _, s := range allRows() {
		if s.Reason == reason && !s.Listener {
			return row(s), true
		}
	}
	return RefusalRow{}, false
}

// RouteShape is what of a route's configuration decides which refusals
// levee may answer its requests with.
type RouteShape struct {
	// RejectUnderscores: server.underscores_in_headers is reject.
	RejectUnderscores bool
	// Methods: the route matches some methods only.
	Methods bool
	// MaxBody: the route caps its request bodies (max_body_bytes).
	MaxBody bool
	// Consumers: the route identifies its callers (api_key, hmac): they
	// may be unauthenticated, forbidden, rate limited or out of quota.
	Consumers bool
	// ForwardAuth: the route asks an authorization service (auth:
	// forward): it may be unavailable or busy (the service's own denials
	// are its answers, not levee refusals).
	ForwardAuth bool
	// AnonymousLimits: a route without consumers rate limits by address.
	AnonymousLimits bool
	// Memory: the memory guard is on.
	Memory bool
	// Admission describes the limits in front of the route's upstream or
	// data source; nil when there are none.
	Admission *AdmissionShape
	// Data describes a data route; nil for a proxied one.
	Data *dataquery.RouteShape
}

// AdmissionShape is an admission block's shape.
type AdmissionShape struct {
	// Queue: requests wait in a queue (max_queue > 0).
	Queue bool
}

// RouteRefusals lists the refusals levee may answer the requests of a
// route of shape s with: the request path's checks, the route's
// consumers, admission control in front of its upstream or data source,
// and the forwarding or the data query.
func RouteRefusals(s RouteShape) []RefusalRow {
	reasons := []Reason{ReasonBadPath, ReasonHeaderTooLarge}
	if s.RejectUnderscores {
		reasons = append(reasons, ReasonBadHeaderName)
	}
	if s.Methods {
		reasons = append(reasons, ReasonMethodNotAllowed)
	}
	if s.MaxBody {
		reasons = append(reasons, ReasonBodyTooLarge)
	}
	if s.Consumers {
		reasons = append(reasons, ReasonUnauthenticated, ReasonForbidden, ReasonRateLimited, ReasonQuotaExhausted)
	} else if s.AnonymousLimits {
		reasons = append(reasons, ReasonRateLimited)
	}
	if s.ForwardAuth {
		reasons = append(reasons, ReasonAuthUnavailable, ReasonAuthBusy)
	}
	if s.Memory {
		reasons = append(reasons, ReasonMemoryPressure)
	}
	if s.Data != nil {
		reasons = append(reasons, admissionReasons(s.Admission)...)
		for _, r := range dataquery.RouteReasons(*s.Data) {
			reasons = append(reasons, Reason(r))
		}
	} else {
		reasons = append(reasons, ReasonBadRequest)
		reasons = append(reasons, admissionReasons(s.Admission)...)
		reasons = append(reasons, ReasonNoAvailableEndpoint, ReasonUpstreamUnavailable, ReasonUpstreamTimeout)
	}
	out := make([]RefusalRow, 0, len(reasons))
	for _, r := range reasons {
		if rf, ok := LookupRefusal(r); ok {
			out = append(out, rf)
		}
	}
	return out
}

// admissionReasons are the refusals of an admission block a (none
// without one): concurrency_limit without a queue, queue_full and
// queue_timeout with one.
func admissionReasons(a *AdmissionShape) []Reason {
	if a == nil {
		return nil
	}
	out := []Reason{ReasonConcurrencyLimit}
	if a.Queue {
		out = []Reason{ReasonQueueFull, ReasonQueueTimeout}
	}
	return append(out, ReasonShedPriority, ReasonConsumerLimit)
}
