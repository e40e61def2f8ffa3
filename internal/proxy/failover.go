package proxy

// Dead endpoints cost clients nothing; retries leave a dead zone.
//
// FREE RETRIES. An attempt that failed to connect (refused, connect
// timeout; a stale pooled connection is retried on a fresh one inside the
// fast path, so what comes out of it is the fresh connection's dial error)
// sent no byte to any backend. Sending it to another endpoint adds no load
// to any backend beyond what the request would have cost had the picker
// chosen that endpoint first, so such a retry does not spend the
// upstream's retry budget, whose purpose is to cap the extra load retries
// put on backends. It is still bounded by the policy's attempts: each
// attempt costs levee a dial and the client time, and a request must not
// walk an upstream of dead endpoints one by one forever.
//
// FAST EJECTION. A refused connection means nothing listens at the
// address. The attempt marks the endpoint's Stats (an atomic store and a
// non-blocking signal to the health manager, which ejects it at once,
// within max_ejection_percent). Until the picker is rebuilt without it,
// the mark keeps other requests' retries away from it for refusedMemory.
//
// RETRY HOSTS. A retry goes to an endpoint that has not failed in this
// request (Envoy's previous_hosts retry host predicate): tried remembers
// up to maxTried addresses on the stack, as many as a policy may have
// attempts. The picker is asked first, a bounded number of times, so the
// balancer's shares and zone tiers hold for retries too; when every draw
// is an endpoint that failed (here, or refused lately), the zone tiers are
// walked in failover order and the first with an untried serving endpoint
// takes the retry (Envoy's previous_priorities: a tier whose endpoints all
// failed is skipped). So when a whole zone dies, a retry leaves it as soon
// as its own endpoints are exhausted, without waiting for health checks.

import (
	"errors"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

// maxTried is the most endpoints a request remembers as failed: the
// largest attempts a retry policy may have (config's maximum).
const maxTried = 10

// maxRetryDraws bounds the picker draws of one retry pick before the
// tiers are walked.
const maxRetryDraws = 8

// refusedMemory is how long a refused connection keeps an endpoint out of
// every request's retries (it is usually ejected within milliseconds).
const refusedMemory = time.Second

// triedSet is the endpoints that failed in one request. Fixed size, kept
// on the stack: no allocation per request.
type triedSet struct {
	n    int
	addr [maxTried]string
}

func (s *triedSet) add(ep *endpoint.Endpoint) {
	if s.n < len(s.addr) && !s.has(ep.Address) {
		s.addr[s.n] = ep.Address
		s.n++
	}
}

func (s *triedSet) has(addr string) bool {
	for _, a := range s.addr[:s.n] {
		if a == addr {
			return true
		}
	}
	return false
}

// noteRefused marks ep when err says its address refused the connection.
func noteRefused(ep *endpoint.Endpoint, err error, now time.Time) {
	if errors.Is(err, syscall.ECONNREFUSED) {
		ep.Stats.Refused(now.UnixNano())
	}
}

// pickRetry picks the endpoint of a retry: the picker's choice when it is
// an endpoint that has not failed in this request nor refused a connection
// lately, else a weighted choice among such endpoints in the first zone
// tier (the upstream's endpoints without zones) that has one, else the
// picker's first choice. Bounded: maxRetryDraws picks plus one pass over
// the endpoints; no allocation.
func pickRetry(up *Balance, tried *triedSet, now time.Time) (*endpoint.Endpoint, error) {
	since := now.Add(-refusedMemory).UnixNano()
	var first *endpoint.Endpoint
	for range min(max(1, len(up.Endpoints)), maxRetryDraws) {
		ep, err := up.Picker.Pick()
		if err != nil {
			return nil, err
		}
		if first == nil {
			first = ep
		}
		if untried(ep, tried, since) {
			return ep, nil
		}
	}
	if up.Tiers == nil {
		if ep := pickUntried(up.Endpoints, tried, since); ep != nil {
			return ep, nil
		}
	}
	for _, tier := range up.Tiers {
		if ep := pickUntried(tier, tried, since); ep != nil {
			return ep, nil
		}
	}
	return first, nil // every endpoint failed here or lately: as the picker says
}

// untried reports whether ep serves, has not failed in this request and
// has not refused a connection since since.
func untried(ep *endpoint.Endpoint, tried *triedSet, since int64) bool {
	return ep.Weight > 0 && !tried.has(ep.Address) && !ep.Stats.RefusedSince(since)
}

// pickUntried picks among eps's untried endpoints in proportion to their
// weights; nil when there is none. Two passes over eps.
func pickUntried(eps []*endpoint.Endpoint, tried *triedSet, since int64) *endpoint.Endpoint {
	var sum uint64
	for _, ep := range eps {
		if untried(ep, tried, since) {
			sum += uint64(ep.Weight)
		}
	}
	if sum == 0 {
		return nil
	}
	draw := rand.Uint64N(sum)
	for _, ep := range eps {
		if untried(ep, tried, since) {
			if draw < uint64(ep.Weight) {
				return ep
			}
			draw -= uint64(ep.Weight)
		}
	}
	return nil // a refusal was marked between the passes
}
