package upstream

import "time"

// Refusal is a forwarder's own answer in levee's refusal vocabulary,
// returned as the attempt's error: a data source that turned the request
// away (a bad parameter, a statement past its timeout, a database that is
// down) rather than an endpoint that failed to answer. The request path
// writes it with its reason's status and JSON body (proxy's reason table
// must have a row for every Reason a forwarder returns) and never retries
// it. A forwarder returns it unwrapped: the request path type-asserts it.
type Refusal struct {
	// Reason is the stable snake_case code of levee's refusal table.
	Reason string
	// Param names the request parameter at fault, if any.
	Param string
	// Detail says precisely what was wrong. It may quote part of the
	// request (clipped and escaped by the forwarder), so it is never
	// cached with the reason's rendered body.
	Detail string
	// RetryAfter, when > 0, replaces the reason's default Retry-After.
	RetryAfter time.Duration
	// Failure: the source failed (it timed out or is down), which counts
	// against it in the endpoint's stats and the adaptive limit. Otherwise
	// nothing was run and the fault is the client's.
	Failure bool
}

func (r *Refusal) Error() string {
	if r.Detail != "" {
		return r.Reason + ": " + r.Detail
	}
	return r.Reason
}
