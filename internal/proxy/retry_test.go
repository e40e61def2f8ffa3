package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/retrybudget"
)

// TestBackoffBounds: retry n waits in [0, min(max, base·2^(n-1))).
func TestBackoffBounds(t *testing.T) {
	p := &RetryPolicy{BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond}
	for n, ceiling := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 4: 80 * time.Millisecond, 5: 100 * time.Millisecond, 64: 100 * time.Millisecond} {
		var top time.Duration
		for range 2000 {
			d := p.backoff(n)
			if d < 0 || d >= ceiling {
				t.Fatalf("retry %d: backoff %v outside [0, %v)", n, d, ceiling)
			}
			top = max(top, d)
		}
		if top < ceiling/2 {
			t.Errorf("retry %d: largest of 2000 backoffs %v; full jitter should reach near %v", n, top, ceiling)
		}
	}
	if d := (&RetryPolicy{}).backoff(3); d != 0 {
		t.Errorf("zero backoff settings give %v, want 0", d)
	}
}

func TestRetryable(t *testing.T) {
	pol := &RetryPolicy{Attempts: 3, OnConnectFailure: true, OnResetBeforeResponse: true, OnStatus: []int{502, 503, 504}}
	get, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	post, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader("b"))
	keyed, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader("b"))
	keyed.Header.Set("Idempotency-Key", "k")
	untouched := &untouchedBody{}
	touched := &untouchedBody{read: true}
	for _, tc := range []struct {
		name   string
		r      *http.Request
		fail   failure
		status int
		held   *untouchedBody
		want   bool
	}{
		{"GET connect failure", get, failConnect, 0, nil, true},
		{"POST connect failure (nothing sent)", post, failConnect, 0, nil, true},
		{"POST connect failure, streaming body untouched", post, failConnect, 0, untouched, true},
		{"POST connect failure, streaming body partly sent", post, failConnect, 0, touched, false},
		{"GET reset before response", get, failReset, 0, nil, true},
		{"POST reset before response", post, failReset, 0, nil, false},
		{"keyed POST reset before response", keyed, failReset, 0, nil, true},
		{"GET 503", get, "", 503, nil, true},
		{"GET 500 (not listed)", get, "", 500, nil, false},
		{"POST 503", post, "", 503, nil, false},
		{"keyed POST 503", keyed, "", 503, nil, true},
		{"GET 503 with an unbuffered body", get, "", 503, untouched, false},
		{"GET timeout counts as 504", get, failTimeout, 0, nil, true},
	} {
		if got := retryable(pol, tc.r, tc.fail, tc.status, tc.held); got != tc.want {
			t.Errorf("%s: retryable = %v, want %v", tc.name, got, tc.want)
		}
	}
	noTimeout := &RetryPolicy{Attempts: 3, OnStatus: []int{503}}
	if retryable(noTimeout, get, failTimeout, 0, nil) {
		t.Error("timeout retried although 504 is not listed")
	}
}

func TestRetryWaitHonoursRetryAfter(t *testing.T) {
	p := &RetryPolicy{BackoffBase: time.Millisecond, BackoffMax: 2 * time.Second}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	resp := func(v string) *http.Response {
		r := &http.Response{Header: http.Header{}}
		if v != "" {
			r.Header.Set("Retry-After", v)
		}
		return r
	}
	if w, ok := retryWait(p, resp("1"), 1, now); !ok || w < time.Second {
		t.Errorf("Retry-After 1: wait %v ok %v; want at least 1s", w, ok)
	}
	if _, ok := retryWait(p, resp("3"), 1, now); ok {
		t.Error("Retry-After 3 s beyond backoff max 2 s: retried, want passed through")
	}
	if _, ok := retryWait(p, resp(now.Add(time.Minute).Format(http.TimeFormat)), 1, now); ok {
		t.Error("Retry-After date a minute away: retried, want passed through")
	}
	if w, ok := retryWait(p, resp("soon"), 1, now); !ok || w >= time.Millisecond {
		t.Errorf("unparseable Retry-After: wait %v ok %v; want the plain backoff", w, ok)
	}
}

// TestBackoffUsesRand: the wait before retry n is drawn from the policy's
// random source over exactly [0, min(max, base·2^(n-1))), and the draw is
// the wait; a Retry-After longer than the draw wins, a shorter one loses.
func TestBackoffUsesRand(t *testing.T) {
	var asked int64
	draw := func(n int64) int64 { asked = n; return n - 1 }
	p := &RetryPolicy{BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Rand: draw}
	for n, ceiling := range map[int]time.Duration{1: 10 * time.Millisecond, 3: 40 * time.Millisecond, 5: 100 * time.Millisecond, 40: 100 * time.Millisecond} {
		if d := p.backoff(n); d != ceiling-1 || asked != int64(ceiling) {
			t.Errorf("retry %d: backoff %v drawn over [0, %v), want %v over [0, %v)", n, d, time.Duration(asked), ceiling-1, ceiling)
		}
	}
	p.Rand = func(int64) int64 { return 0 }
	if d := p.backoff(2); d != 0 {
		t.Errorf("draw 0: backoff %v, want 0", d)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p = &RetryPolicy{BackoffBase: 4 * time.Second, BackoffMax: 8 * time.Second, Rand: draw}
	r := &http.Response{Header: http.Header{"Retry-After": {"1"}}}
	if w, ok := retryWait(p, r, 1, now); !ok || w != 4*time.Second-1 {
		t.Errorf("backoff 4s-1ns, Retry-After 1s: wait %v ok %v; want the backoff", w, ok)
	}
	r.Header.Set("Retry-After", "6")
	if w, ok := retryWait(p, r, 1, now); !ok || w != 6*time.Second {
		t.Errorf("backoff 4s-1ns, Retry-After 6s: wait %v ok %v; want 6s", w, ok)
	}
}

// TestRetryAttempt: the whole decision in one call, on one reading of
// the clock and the policy's stepped random source: a retry the budget
// has no room for is refused and said to be (budgetExhausted), a free one
// (nothing reached a backend) goes regardless, and the wait is the draw.
func TestRetryAttempt(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	step := int64(0)
	draw := func(n int64) int64 { step++; return min(step, n-1) } // 1, 2, 3 ... ns
	pol := &RetryPolicy{Attempts: 3, OnConnectFailure: true, OnStatus: []int{503}, BackoffBase: time.Second, BackoffMax: time.Second, Rand: draw}
	get, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	empty, err := retrybudget.New(retrybudget.Options{Ratio: 0, MinPerSecond: 0, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if v := retryAttempt(pol, 1, get, result{status: 503}, nil, nil, time.Time{}, empty, now); v.retry || !v.budgetExhausted {
		t.Errorf("503 with an empty budget: %+v, want refused for the budget", v)
	}
	if v := retryAttempt(pol, 1, get, result{fail: failConnect}, nil, nil, time.Time{}, empty, now); !v.retry || v.budgetExhausted || v.wait != 2 {
		t.Errorf("connect failure with an empty budget: %+v, want a free retry after the second draw (2ns)", v)
	}
	if v := retryAttempt(pol, 1, get, result{status: 503}, nil, nil, time.Time{}, nil, now); !v.retry || v.wait != 3 {
		t.Errorf("503 without a budget: %+v, want a retry after the third draw (3ns)", v)
	}
	if v := retryAttempt(pol, 3, get, result{status: 503}, nil, nil, time.Time{}, nil, now); v.retry || v.budgetExhausted {
		t.Errorf("503 on the last attempt: %+v, want no retry", v)
	}
	if v := retryAttempt(pol, 1, get, result{status: 503}, nil, nil, now.Add(3), nil, now); v.retry {
		t.Errorf("a wait (4ns) past the deadline (3ns away): %+v, want no retry", v)
	}
}
