// Package endpoint is levee's shared vocabulary for upstream servers: the
// Endpoint a picker chooses, the live counters kept for it, and the Outcome
// a request reports when it ends. It is a leaf: it imports nothing internal.
package endpoint

import "sync/atomic"

// MaxWeight is the largest weight, in whole units, that configuration and
// registries may give an endpoint.
const MaxWeight = 10000

// WeightScale is how many units of Endpoint.Weight make one whole unit of
// weight: weights are kept in hundredths, so a registry's 0.5 : 1 stays
// 1 : 2 while a balancer's arithmetic stays exact and integral. The largest
// Endpoint.Weight is MaxWeight × WeightScale.
const WeightScale = 100

// Endpoint is one upstream server as the request path sees it. Address and
// Weight never change after construction; a new weight means a new Endpoint
// in a new snapshot. Stats is shared by every snapshot that contains the same
// address, so counters survive reloads. Safe for concurrent use.
type Endpoint struct {
	// Address is host:port, validated before an Endpoint is built.
	Address string
	// Weight is in hundredths (WeightScale): 0..MaxWeight×WeightScale; a
	// configured weight 3 is 300. 0 means drained: pickers never return it,
	// but requests already sent to it finish.
	Weight uint32
	// Zone is the failure domain the endpoint lives in; empty when unknown.
	Zone string
	// Stats holds live counters. Never nil for an Endpoint built by New.
	Stats *Stats
}

// New returns an Endpoint with fresh counters.
func New(address string, weight uint32) *Endpoint {
	return &Endpoint{Address: address, Weight: weight, Stats: &Stats{}}
}

// Stats are an endpoint's live counters. All fields are atomics; the zero
// value is ready to use.
type Stats struct {
	// Inflight is the number of requests currently sent to the endpoint.
	Inflight atomic.Int64
	// Requests counts requests sent to the endpoint.
	Requests atomic.Uint64
	// Failures counts requests that ended in a gateway failure (connect
	// error, timeout, reset) at this endpoint.
	Failures atomic.Uint64
}

// Outcome is how a request to an endpoint ended, as reported by the proxy.
type Outcome uint8

const (
	// Success: the endpoint answered (any status the endpoint chose).
	Success Outcome = iota
	// Failure: connect error, reset or timeout at the endpoint.
	Failure
	// NotSent: the request never reached the endpoint (cancelled before dial).
	NotSent
	// Abandoned: the client went away before the endpoint answered; says
	// nothing about the endpoint's health.
	Abandoned
)

// String returns the outcome's stable lower-case name.
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case NotSent:
		return "not_sent"
	case Abandoned:
		return "abandoned"
	}
	return "unknown"
}

// Begin marks a request as sent to e. Every Begin must be paired with
// exactly one End. (A pair of methods, not a returned closure, so that the
// request path does not allocate.)
func (e *Endpoint) Begin() {
	e.Stats.Inflight.Add(1)
	e.Stats.Requests.Add(1)
}

// End records how a request begun with Begin ended.
func (e *Endpoint) End(o Outcome) {
	e.Stats.Inflight.Add(-1)
	if o == Failure {
		e.Stats.Failures.Add(1)
	}
}
