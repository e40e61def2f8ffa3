// Package balance holds levee's endpoint pickers: pure code that chooses the
// upstream endpoint for one request. It does no I/O and reads no clock; where
// time matters it is a parameter.
//
// A Picker is an immutable snapshot of one endpoint set. The control path
// builds a new Picker whenever the set or a weight changes and publishes it
// (for example with atomic.Pointer); the request path only calls Pick, which
// never blocks, takes no lock and does not allocate.
//
// Every loop in this package has an explicit bound that does not depend on
// the values it is given: levee exists because a balancer's gcd loop, fed a
// weight it did not expect, never returned.
package balance

import (
	"errors"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

// ErrNoEndpoint is returned by Pick when the set is empty or every endpoint
// in it is drained (weight 0). The request cannot be sent anywhere; the proxy
// answers 503 so that the client retries later or elsewhere.
var ErrNoEndpoint = errors.New("no available endpoint")

// Picker chooses an endpoint for one request. Implementations are immutable
// snapshots, safe for concurrent use; Pick never blocks, takes no lock and
// does not allocate. Pick returns either a non-nil endpoint and a nil error,
// or nil and ErrNoEndpoint.
type Picker interface {
	Pick() (*endpoint.Endpoint, error)
}

// Observer learns how fast endpoints answer: the request path tells it
// each attempt's time to response headers, measured at now (a connect
// failure's is no latency and is not told). It reports false when ep is
// not one of its endpoints. The least_request balancer's peak-EWMA
// estimate is one (LeastRequest, LeastRequestSet). Observe must be safe
// for concurrent use, bounded and allocation-free.
type Observer interface {
	Observe(ep *endpoint.Endpoint, rtt time.Duration, now time.Time) bool
}
