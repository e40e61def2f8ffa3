package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

// TestShouldRetry: the retry decision over an attempt's typed result, as a
// table: decideRetry's conditions (covered in full by TestDecideRetry),
// then the wait, which must end before the route's deadline and must not
// undercut an upstream's Retry-After longer than BackoffMax. An attempt
// the client ended is never retried.
func TestShouldRetry(t *testing.T) {
	pol := &RetryPolicy{Attempts: 3, OnConnectFailure: true, OnResetBeforeResponse: true, OnStatus: []int{503},
		BackoffBase: time.Millisecond, BackoffMax: 10 * time.Millisecond}
	get, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	post, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader("b"))
	now := time.Unix(1_000_000, 0)
	after := func(v string) *http.Response {
		return &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {v}}}
	}
	for _, tc := range []struct {
		name        string
		n           int
		r           *http.Request
		res         result
		resp        *http.Response
		deadline    time.Time
		retry, free bool
		minWait     time.Duration
	}{
		{"connect failure: free", 1, get, result{fail: failConnect}, nil, time.Time{}, true, true, 0},
		{"connect failure, POST: free", 1, post, result{fail: failConnect}, nil, time.Time{}, true, true, 0},
		{"reset: spends the budget", 1, get, result{fail: failReset}, nil, time.Time{}, true, false, 0},
		{"reset, POST: sent, not idempotent", 1, post, result{fail: failReset}, nil, time.Time{}, false, false, 0},
		{"503", 1, get, result{status: 503}, &http.Response{StatusCode: 503}, time.Time{}, true, false, 0},
		{"200", 1, get, result{status: 200}, &http.Response{StatusCode: 200}, time.Time{}, false, false, 0},
		{"last attempt", 3, get, result{fail: failConnect}, nil, time.Time{}, false, false, 0},
		{"client ended it", 1, get, result{client: true}, nil, time.Time{}, false, false, 0},
		{"deadline already passed", 1, get, result{fail: failConnect}, nil, now, false, false, 0},
		{"deadline far", 1, get, result{fail: failConnect}, nil, now.Add(time.Second), true, true, 0},
		{"Retry-After within BackoffMax is waited", 1, get, result{status: 503}, after("0"), time.Time{}, true, false, 0},
		{"Retry-After beyond BackoffMax: answer as is", 1, get, result{status: 503}, after("5"), time.Time{}, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait, retry, free := shouldRetry(pol, tc.n, tc.r, tc.res, nil, tc.resp, tc.deadline, now)
			if retry != tc.retry || free != tc.free {
				t.Fatalf("retry, free = %v, %v; want %v, %v", retry, free, tc.retry, tc.free)
			}
			if retry && (wait < tc.minWait || wait >= pol.BackoffMax) {
				t.Errorf("wait %v outside [%v, %v)", wait, tc.minWait, pol.BackoffMax)
			}
			if !retry && wait != 0 {
				t.Errorf("no retry, but wait %v", wait)
			}
		})
	}
	// The upstream's Retry-After (1s, within BackoffMax) is waited in
	// full: a retry that would pass the deadline is not made; one that
	// ends before it waits at least that long.
	long := &RetryPolicy{Attempts: 3, OnStatus: []int{503}, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Second}
	if _, retry, _ := shouldRetry(long, 1, get, result{status: 503}, nil, after("1"), now.Add(500*time.Millisecond), now); retry {
		t.Error("retried although the Retry-After passes the deadline")
	}
	if wait, retry, _ := shouldRetry(long, 1, get, result{status: 503}, nil, after("1"), now.Add(5*time.Second), now); !retry || wait < time.Second {
		t.Errorf("retry %v after %v; want a retry after at least the upstream's 1s", retry, wait)
	}
}

// TestAttemptOutcome: an attempt's typed result in the one outcome
// vocabulary, as the endpoint's stats and the admission limit take it.
func TestAttemptOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  result
		want endpoint.Outcome
	}{
		{"200", result{status: 200}, endpoint.Success},
		{"502 answered", result{status: 502}, endpoint.Success},
		{"503 answered: congestion", result{status: 503}, endpoint.Failure},
		{"connect failure", result{fail: failConnect}, endpoint.Failure},
		{"reset", result{fail: failReset}, endpoint.Failure},
		{"timeout", result{fail: failTimeout}, endpoint.Failure},
		{"cut off mid-body", result{status: 200, broken: true}, endpoint.Failure},
		{"the client ended it", result{client: true}, endpoint.Abandoned},
	} {
		if got := tc.res.outcome(); got != tc.want {
			t.Errorf("%s: outcome %v, want %v", tc.name, got, tc.want)
		}
	}
	if (result{fail: failConnect}).reached() || (result{client: true}).reached() || !(result{fail: failReset}).reached() {
		t.Error("reached: a connect failure or a client's end reached no endpoint; a reset did")
	}
}

// TestAdmissionOutcome: what the admission release is told when a request
// ends. levee's own answers made before any attempt (no_available_endpoint
// among them: a 503 that once counted as upstream congestion for the
// adaptive limit) are NotSent; after attempts, the last one's outcome.
func TestAdmissionOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    exchange
		want endpoint.Outcome
	}{
		{"no endpoint: levee's own 503", exchange{status: 503, reason: ReasonNoAvailableEndpoint}, endpoint.NotSent},
		{"no memory to buffer the body: levee's own 503", exchange{status: 503, reason: ReasonMemoryPressure}, endpoint.NotSent},
		{"body refused before any attempt", exchange{status: 400, reason: ReasonBadRequest}, endpoint.NotSent},
		{"client left while queued or before an answer", exchange{status: statusClientClosed, attempts: 1, outcome: endpoint.Failure}, endpoint.Abandoned},
		{"nothing answered", exchange{attempts: 1, outcome: endpoint.Success}, endpoint.Abandoned},
		{"upstream answered 503", exchange{status: 503, attempts: 1, outcome: endpoint.Failure}, endpoint.Failure},
		{"upstream timed out", exchange{status: 504, reason: ReasonUpstreamTimeout, attempts: 1, outcome: endpoint.Failure}, endpoint.Failure},
		{"retry found no endpoint: the failed attempt counts", exchange{status: 503, reason: ReasonNoAvailableEndpoint, attempts: 1, outcome: endpoint.Failure}, endpoint.Failure},
		{"retry found no endpoint after a 502 answer", exchange{status: 503, reason: ReasonNoAvailableEndpoint, attempts: 1, outcome: endpoint.Success}, endpoint.Success},
		{"answered", exchange{status: 200, attempts: 2, outcome: endpoint.Success}, endpoint.Success},
	} {
		if got := admissionOutcome(&tc.x); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
