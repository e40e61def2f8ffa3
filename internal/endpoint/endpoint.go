// Package endpoint is levee's shared vocabulary for upstream servers: the
// Endpoint a picker chooses, the live counters kept for it, and the Outcome
// a request reports when it ends (to the endpoint and to admission). It is
// a leaf: it imports nothing internal.
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
	// Status5xx counts the endpoint's answers with a 5xx status (for the
	// levee_endpoint_errors_total metric; one atomic add per 5xx answer).
	Status5xx atomic.Uint64
	// GatewayFailuresInARow counts the attempts in a row that ended in a
	// gateway failure: a connect error, reset or timeout, or an answer
	// 502, 503 or 504. Any other answer resets it.
	GatewayFailuresInARow atomic.Uint32
	// Status5xxInARow counts the attempts in a row that ended in any 5xx
	// answer or a gateway failure. An answer below 500 resets it.
	Status5xxInARow atomic.Uint32

	watch   atomic.Pointer[Watch]
	tripped atomic.Bool
	// refused is set when a connection to the endpoint was refused, until
	// the health manager takes it; refusedAt is when (Unix nanoseconds).
	refused   atomic.Bool
	refusedAt atomic.Int64
}

// Watch asks an endpoint's counters to raise a signal when a run of
// failures reaches a threshold (passive outlier detection). It is
// immutable once set; the health manager owns it.
type Watch struct {
	// GatewayFailures is the GatewayFailuresInARow that trips the
	// signal; 0 watches nothing.
	GatewayFailures uint32
	// Status5xx is the Status5xxInARow that trips the signal; 0 watches
	// nothing.
	Status5xx uint32
	// Signal is sent to without blocking when a threshold is reached or a
	// connection is refused: a buffered channel whose reader then calls
	// TakeTrip and TakeRefused on the endpoints it watches. A full channel
	// drops the send; the flags stay set.
	Signal chan<- struct{}
}

// SetWatch installs w (nil removes the watch).
func (s *Stats) SetWatch(w *Watch) { s.watch.Store(w) }

// TakeTrip reports whether a watched threshold was reached since the last
// call, and clears the flag.
func (s *Stats) TakeTrip() bool { return s.tripped.Swap(false) }

// Refused records that a connection to the endpoint was refused at now
// (Unix nanoseconds): nothing listens there. It raises the watch's signal
// so that the health manager can take the endpoint out at once (NGINX's
// max_fails=1), and marks the endpoint for RefusedSince, which lets other
// requests' retries avoid it before the picker is rebuilt. Lock-free; one
// non-blocking channel send.
func (s *Stats) Refused(now int64) {
	s.refusedAt.Store(now)
	s.refused.Store(true)
	if w := s.watch.Load(); w != nil {
		select {
		case w.Signal <- struct{}{}:
		default:
		}
	}
}

// TakeRefused reports whether a connection was refused since the last
// call, and clears the flag.
func (s *Stats) TakeRefused() bool { return s.refused.Swap(false) }

// RefusedSince reports whether a connection to the endpoint was refused at
// or after since (Unix nanoseconds).
func (s *Stats) RefusedSince(since int64) bool {
	at := s.refusedAt.Load()
	return at != 0 && at >= since
}

// ResetRuns sets both failure runs back to 0 (after an ejection, so the
// endpoint starts afresh when it returns).
func (s *Stats) ResetRuns() {
	s.GatewayFailuresInARow.Store(0)
	s.Status5xxInARow.Store(0)
}

// record counts one attempt's result in the failure runs and trips the
// watch when a run reaches its threshold exactly (so one run trips once).
// gateway: a gateway failure; fivexx: any 5xx or gateway failure. Lock-free;
// a trip costs one non-blocking channel send.
func (s *Stats) record(gateway, fivexx bool) {
	var gw, sx uint32
	if gateway {
		gw = s.GatewayFailuresInARow.Add(1)
	} else if s.GatewayFailuresInARow.Load() != 0 {
		s.GatewayFailuresInARow.Store(0)
	}
	if fivexx {
		sx = s.Status5xxInARow.Add(1)
	} else if s.Status5xxInARow.Load() != 0 {
		s.Status5xxInARow.Store(0)
	}
	w := s.watch.Load()
	if w == nil || (!gateway && !fivexx) {
		return
	}
	if (w.GatewayFailures > 0 && gw == w.GatewayFailures) || (w.Status5xx > 0 && sx == w.Status5xx) {
		s.tripped.Store(true)
		select {
		case w.Signal <- struct{}{}:
		default:
		}
	}
}

// Outcome is how a request (an attempt at an endpoint) ended: the one
// outcome vocabulary of the request path. The proxy types each attempt's
// result once and maps it here; End takes it for an attempt the endpoint
// did not answer (EndStatus for one it did), and admission's Release.Done
// takes the last attempt's, where Success and Failure are latency samples
// and the other two are none.
type Outcome uint8

const (
	// Success: the endpoint answered (any status the endpoint chose, 503
	// aside).
	Success Outcome = iota
	// Failure: connect error, reset or timeout at the endpoint, an answer
	// it broke off, or a 503 (a congestion signal for admission).
	Failure
	// NotSent: the request never reached an endpoint (levee answered it
	// itself: no endpoint available, a body refused before any attempt).
	NotSent
	// Abandoned: the client went away, or its own body ended the attempt;
	// says nothing about the endpoint's health.
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

// End records how a request begun with Begin ended. A Failure also counts
// as a gateway failure in the endpoint's failure runs; the other outcomes
// leave the runs alone (use EndStatus when the endpoint answered).
func (e *Endpoint) End(o Outcome) {
	e.Stats.Inflight.Add(-1)
	if o == Failure {
		e.Stats.Failures.Add(1)
		e.Stats.record(true, true)
	}
}

// EndStatus ends a request begun with Begin to which the endpoint answered
// with status: a Success for the request's accounting, and a result for
// the failure runs that passive outlier detection watches (502, 503 and
// 504 are gateway failures; any 5xx extends the 5xx run; anything else
// resets both).
func (e *Endpoint) EndStatus(status int) {
	e.Stats.Inflight.Add(-1)
	gateway := status == 502 || status == 503 || status == 504
	fivexx := status >= 500 && status <= 599
	if fivexx {
		e.Stats.Status5xx.Add(1)
	}
	e.Stats.record(gateway, fivexx)
}
