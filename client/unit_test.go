package client

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestNewValidation(t *testing.T) {
	cases := []struct {
		name string
		o    Options
		want []string // substrings of the error; nil means valid
	}{
		{"zero value", Options{}, nil},
		{"one attempt", Options{MaxAttempts: 1}, nil},
		{"negative attempts", Options{MaxAttempts: -1}, []string{"Options.MaxAttempts", "-1"}},
		{"too many attempts", Options{MaxAttempts: 11}, []string{"Options.MaxAttempts", "11"}},
		{"negative base", Options{Backoff: Backoff{Base: -time.Second}}, []string{"Options.Backoff.Base"}},
		{"max below base", Options{Backoff: Backoff{Base: time.Second, Max: time.Millisecond}}, []string{"Options.Backoff.Max", "1ms"}},
		{"base above default max", Options{Backoff: Backoff{Base: 5 * time.Second}}, nil},
		{"status out of range", Options{RetryOn: []int{503, 200}}, []string{"Options.RetryOn[1]", "200"}},
		{"empty retry-on", Options{RetryOn: []int{}}, nil},
		{"tokens NaN", Options{Budget: Budget{MaxTokens: math.NaN()}}, []string{"Options.Budget.MaxTokens"}},
		{"tokens too many", Options{Budget: Budget{MaxTokens: 1001}}, []string{"Options.Budget.MaxTokens"}},
		{"ratio negative", Options{Budget: Budget{TokenRatio: -0.1}}, []string{"Options.Budget.TokenRatio"}},
		{"ratio rounds to zero", Options{Budget: Budget{TokenRatio: 0.0001}}, []string{"Options.Budget.TokenRatio", "three decimal"}},
		{"budget disabled ignores fields", Options{Budget: Budget{Disabled: true, MaxTokens: -1}}, nil},
		{"k below one", Options{Throttle: Throttle{K: 0.5}}, []string{"Options.Throttle.K", "0.5"}},
		{"k infinite", Options{Throttle: Throttle{K: math.Inf(1)}}, []string{"Options.Throttle.K"}},
		{"window too short", Options{Throttle: Throttle{Window: time.Millisecond}}, []string{"Options.Throttle.Window"}},
		{"negative retry-after", Options{MaxRetryAfter: -1}, []string{"Options.MaxRetryAfter"}},
		{"every problem at once", Options{MaxAttempts: -1, MaxRetryAfter: -1, Throttle: Throttle{K: 0.1}},
			[]string{"Options.MaxAttempts", "Options.MaxRetryAfter", "Options.Throttle.K"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := New(tc.o)
			if tc.want == nil {
				if err != nil || tr == nil {
					t.Fatalf("New: %v, want a transport", err)
				}
				return
			}
			if err == nil || tr != nil {
				t.Fatalf("New: got (%v, %v), want an error", tr, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	s, err := Options{Backoff: Backoff{Base: 5 * time.Second}}.validate()
	if err != nil {
		t.Fatal(err)
	}
	if s.maxAttempts != 3 || s.backoffMax != 5*time.Second || s.maxTokens != 10000 || s.tokenRatio != 100 ||
		s.k != 2 || s.bucketWidth != time.Second || s.buckets != 10 || s.maxRetryAfter != 30*time.Second {
		t.Fatalf("defaults: %+v", s)
	}
	for _, code := range []int{429, 502, 503, 504} {
		if !s.retryOn.has(code) {
			t.Errorf("default RetryOn lacks %d", code)
		}
	}
	for _, code := range []int{200, 404, 500, 501, -1, 700} {
		if s.retryOn.has(code) {
			t.Errorf("default RetryOn has %d", code)
		}
	}
}

func TestWindowBuckets(t *testing.T) {
	cases := []struct {
		w     time.Duration
		width time.Duration
		n     int
	}{
		{time.Second, time.Second, 1},
		{1500 * time.Millisecond, time.Second, 2},
		{2 * time.Minute, time.Second, 120},
		{121 * time.Second, 2 * time.Second, 61},
		{10 * time.Minute, 5 * time.Second, 120},
		{24 * time.Hour, 720 * time.Second, 120},
	}
	for _, tc := range cases {
		width, n := windowBuckets(tc.w)
		if width != tc.width || n != tc.n {
			t.Errorf("windowBuckets(%v) = %v, %d; want %v, %d", tc.w, width, n, tc.width, tc.n)
		}
		if n > maxBuckets || time.Duration(n)*width < tc.w {
			t.Errorf("windowBuckets(%v): %d buckets of %v do not cover it within the bound", tc.w, n, width)
		}
	}
}

// TestBackoffBounds checks full jitter: the wait before retry n lies in
// [0, min(Max, Base·2^n)), at 0 when rand is 0 and just below the cap when
// rand is just below 1 (or misbehaves and returns 1 or more).
func TestBackoffBounds(t *testing.T) {
	base, maxD := 100*time.Millisecond, 2*time.Second
	caps := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000, 2000, 2000, 2000}
	almostOne := math.Nextafter(1, 0)
	for n, capMS := range caps {
		c := capMS * time.Millisecond
		if got := backoffCap(base, maxD, n); got != c {
			t.Errorf("backoffCap(n=%d) = %v, want %v", n, got, c)
		}
		for _, r := range []float64{0, 0.5, almostOne, 1, 7, -3, math.NaN()} {
			tr := mustNew(t, Options{Backoff: Backoff{Base: base, Max: maxD}, Rand: constRand(r)})
			d := tr.backoff(n)
			if d < 0 || d >= c {
				t.Errorf("backoff(n=%d, rand=%v) = %v, outside [0, %v)", n, r, d, c)
			}
			switch {
			case r == 0 || r < 0 || math.IsNaN(r):
				if d != 0 {
					t.Errorf("backoff(n=%d, rand=%v) = %v, want 0", n, r, d)
				}
			case r == 0.5:
				if d != c/2 {
					t.Errorf("backoff(n=%d, rand=0.5) = %v, want %v", n, d, c/2)
				}
			default:
				if d < c-time.Microsecond {
					t.Errorf("backoff(n=%d, rand=%v) = %v, want just below %v", n, r, d, c)
				}
			}
		}
	}
	// No overflow for huge n or huge bounds.
	if got := backoffCap(time.Nanosecond, time.Duration(math.MaxInt64), 1000); got != time.Duration(math.MaxInt64) {
		t.Errorf("backoffCap huge = %v", got)
	}
	if got := backoffCap(time.Hour, time.Duration(math.MaxInt64), 62); got != time.Duration(math.MaxInt64) {
		t.Errorf("backoffCap(1h, max, 62) = %v", got)
	}
}

// TestBudgetSteps walks the gRPC token bucket with the defaults (10 tokens,
// ratio 0.1): retries are allowed while tokens > 5, exactly.
func TestBudgetSteps(t *testing.T) {
	b := newBudget(10_000, 100)
	steps := []struct {
		op      string // "f" failure, "s" success
		n       int
		tokens  int64 // thousandths after the step
		allowed bool
	}{
		{"", 0, 10_000, true},
		{"s", 3, 10_000, true}, // capped at max
		{"f", 1, 9_000, true},
		{"f", 3, 6_000, true},
		{"f", 1, 5_000, false}, // exactly max/2: denied
		{"s", 1, 5_100, true},  // just above: allowed
		{"f", 1, 4_100, false},
		{"f", 10, 0, false}, // floored at 0
		{"s", 50, 5_000, false},
		{"s", 1, 5_100, true},
		{"s", 100, 10_000, true},
	}
	for i, st := range steps {
		for range st.n {
			if st.op == "s" {
				b.success()
			} else {
				b.failure()
			}
		}
		if b.tokens != st.tokens || b.allowsRetry() != st.allowed {
			t.Fatalf("step %d (%d×%q): tokens %d allowed %v; want %d %v", i, st.n, st.op, b.tokens, b.allowsRetry(), st.tokens, st.allowed)
		}
	}
	// Odd sizes: max 3 tokens, threshold 1.5.
	b = newBudget(3_000, 500)
	b.failure() // 2 > 1.5
	if !b.allowsRetry() {
		t.Fatal("2 of 3 tokens should allow a retry")
	}
	b.failure() // 1
	if b.allowsRetry() {
		t.Fatal("1 of 3 tokens should deny")
	}
	b.success() // 1.5: not above
	if b.allowsRetry() {
		t.Fatal("1.5 of 3 tokens should deny")
	}
}

func TestThrottleProbability(t *testing.T) {
	cases := []struct {
		requests, accepts uint64
		k                 float64
		want              float64
	}{
		{0, 0, 2, 0},
		{1, 0, 2, 1.0 / 2},
		{10, 0, 2, 10.0 / 11},
		{10, 4, 2, 2.0 / 11},
		{10, 5, 2, 0},
		{10, 10, 2, 0},
		{100, 10, 2, 80.0 / 101},
		{100, 40, 2, 20.0 / 101},
		{100, 10, 3, 70.0 / 101},
		{100, 50, 1, 50.0 / 101},
		{1000, 0, 2, 1000.0 / 1001},
	}
	for _, tc := range cases {
		if got := throttleProbability(tc.requests, tc.accepts, tc.k); got != tc.want {
			t.Errorf("p(requests=%d, accepts=%d, K=%v) = %v, want %v", tc.requests, tc.accepts, tc.k, got, tc.want)
		}
	}
}

// TestWindowSlides checks that the ring forgets buckets older than the
// window, keeps the running totals equal to the sum of the buckets, and
// survives a clock that goes backwards.
func TestWindowSlides(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWindow(time.Second, 3, t0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	check := func(step string, now time.Time, req, acc uint64) {
		t.Helper()
		w.advance(now)
		if w.requests != req || w.accepts != acc {
			t.Fatalf("%s: window has %d requests %d accepts, want %d %d", step, w.requests, w.accepts, req, acc)
		}
		var sr, sa uint64
		for _, b := range w.buckets {
			sr += b.requests
			sa += b.accepts
		}
		if sr != w.requests || sa != w.accepts {
			t.Fatalf("%s: totals %d/%d differ from bucket sums %d/%d", step, w.requests, w.accepts, sr, sa)
		}
	}
	w.add(at(0), true)
	w.add(at(0.5), false)
	w.add(at(1), true)
	w.add(at(2.9), true)
	check("within the window", at(2.9), 4, 1)
	check("second 0 forgotten", at(3), 2, 0)
	w.add(at(3.1), true)
	w.add(at(3.2), false)
	check("second 1 forgotten", at(4), 3, 1)
	w.add(at(1), false) // clock went back: counts into the newest bucket
	check("backwards clock", at(4), 4, 2)
	check("long gap forgets all", at(100), 0, 0)
	w.add(at(100), true)
	check("fresh after gap", at(102.99), 1, 0)
	check("and gone again", at(103), 0, 0)
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	const capD = MaxParsedRetryAfter
	cases := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"5", 5 * time.Second, true},
		{"120", 2 * time.Minute, true},
		{" 7\t", 7 * time.Second, true},
		{"007", 7 * time.Second, true},
		{"2147483647", 2147483647 * time.Second, true},
		{"2147483648", capD, true},
		{"99999999999999999999999999999", capD, true},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"5s", 0, false},
		{"1e3", 0, false},
		{"", 0, false},
		{"   ", 0, false},
		{"soon", 0, false},
		{"5 5", 0, false},
		{"\u0665", 0, false}, // Arabic-Indic digit five
		// The three HTTP-date forms of RFC 9110, section 5.6.7.
		{"Sat, 01 Mar 2025 12:00:30 GMT", 30 * time.Second, true}, // IMF-fixdate
		{"Saturday, 01-Mar-25 12:01:00 GMT", time.Minute, true},   // RFC 850
		{"Sat Mar  1 12:00:10 2025", 10 * time.Second, true},      // asctime
		{"Sat, 01 Mar 2025 11:59:00 GMT", 0, true},                // past
		{"Thu, 01 Jan 1970 00:00:00 GMT", 0, true},                // long past
		{"Fri, 31 Dec 9999 23:59:59 GMT", capD, true},             // far future
		{"Sat, 01 Mar 2025 12:00:30 PST", 0, false},               // not GMT
		{"Sat, 32 Mar 2025 12:00:30 GMT", 0, false},               // no such day
		{"Sat, 01 Mar 2025 12:00:30 GMT trailing", 0, false},
	}
	for _, tc := range cases {
		got, ok := ParseRetryAfter(tc.v, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}
