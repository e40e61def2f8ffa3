package client

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// offer sends calls sequential GETs through tr, advancing clk by gap before
// each, and returns how many succeeded (status 200).
func offer(t *testing.T, tr *Transport, clk *fakeClock, url string, calls int, gap time.Duration) (ok int) {
	t.Helper()
	for range calls {
		clk.Advance(gap)
		resp, err := do(t, tr, newReq(t, "GET", url, nil))
		switch {
		case err == nil && resp.StatusCode == http.StatusOK:
			ok++
		case err != nil && !errors.Is(err, ErrThrottled):
			t.Fatalf("unexpected error: %v", err)
		}
	}
	return ok
}

// TestAmplificationAgainstFailingService offers 1000 sequential calls (200
// per second of fake time) to a service answering 503 to everything, with 3
// attempts each, and counts what reaches it.
//
// Bound for the budget alone: every failed attempt takes a token and no
// success refills the bucket, and a retry needs tokens > MaxTokens/2 after
// its failure was counted, so at most MaxTokens/2 retries are ever made:
// requests <= calls + MaxTokens/2, i.e. ε = MaxTokens / (2·calls).
func TestAmplificationAgainstFailingService(t *testing.T) {
	const calls = 1000
	run := func(t *testing.T, o Options) (int, Stats) {
		b := newBackend(t, status(http.StatusServiceUnavailable))
		clk := newFakeClock()
		o.Base, o.Clock, o.Rand = b.srv.Client().Transport, clk, seeded(1)
		tr := mustNew(t, o)
		offer(t, tr, clk, b.srv.URL, calls, 5*time.Millisecond)
		return b.requests(), tr.Stats()
	}

	naive, _ := run(t, Options{Budget: Budget{Disabled: true}, Throttle: Throttle{Disabled: true}})
	if naive != 3*calls {
		t.Fatalf("naive retries: server saw %d, want %d", naive, 3*calls)
	}
	t.Logf("naive (3 attempts, no budget, no throttle): %d requests, ratio %.3f", naive, float64(naive)/calls)

	budgetAlone := map[float64]int{}
	for _, tc := range []struct {
		maxTokens   float64
		maxAttempts int
	}{{10, 3}, {10, 5}, {100, 3}} {
		got, st := run(t, Options{MaxAttempts: tc.maxAttempts, Budget: Budget{MaxTokens: tc.maxTokens}, Throttle: Throttle{Disabled: true}})
		eps := tc.maxTokens / 2 / calls
		ratio := float64(got) / calls
		t.Logf("budget alone (MaxTokens %v, %d attempts): %d requests, ratio %.3f (bound 1+ε = %.3f); budget refused %d retries",
			tc.maxTokens, tc.maxAttempts, got, ratio, 1+eps, st.BudgetExhausted)
		if ratio > 1+eps {
			t.Errorf("budget alone: ratio %.4f above 1+ε = %.4f", ratio, 1+eps)
		}
		if got <= calls {
			t.Errorf("budget alone made no retry at all (%d requests): the budget should allow a few", got)
		}
		if tc.maxAttempts == 3 {
			budgetAlone[tc.maxTokens] = got
		}
	}

	withThrottle, st := run(t, Options{})
	t.Logf("budget + throttle (defaults): %d requests, ratio %.3f; refused locally %d, ErrThrottled calls ≈ %d",
		withThrottle, float64(withThrottle)/calls, st.Throttled, calls-int(st.Attempts-st.Retries))
	if withThrottle >= budgetAlone[10] {
		t.Errorf("with the throttle the server saw %d requests, not fewer than the budget alone (%d)", withThrottle, budgetAlone[10])
	}
	// The SRE throttle with no accept lets request n through with
	// probability 1/(n+1): about ln(calls) of them, far below calls.
	if withThrottle > calls/10 {
		t.Errorf("with the throttle the server saw %d requests, want under %d", withThrottle, calls/10)
	}
}

// TestRecoveryAfterOutage: after an outage like the one above, the service
// answers 200 again while calls keep coming at a fixed rate of fake time.
// The throttle's probability must fall to 0, every call must then succeed,
// and the budget must refill.
//
// Only attempts that reached the service are counted, so during the outage
// the window holds about sqrt(rate·W) failures (p = R/(R+1)); once the
// service is back those leave the window within W, and the successes that
// still get through meanwhile outweigh them sooner. The throttle must open
// within two windows.
func TestRecoveryAfterOutage(t *testing.T) {
	for _, tc := range []struct {
		window time.Duration
		rate   int // calls per second
	}{
		{DefaultWindow, 1},
		{DefaultWindow, 20},
		{DefaultWindow, 200},
		{2 * time.Second, 200},
	} {
		t.Run(fmt.Sprintf("window=%v,rate=%d/s", tc.window, tc.rate), func(t *testing.T) {
			var healthy atomic.Bool
			b := newBackend(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				if healthy.Load() {
					w.WriteHeader(http.StatusOK)
					return
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			})
			clk := newFakeClock()
			tr := mustNew(t, Options{Base: b.srv.Client().Transport, Clock: clk, Rand: seeded(2), Throttle: Throttle{Window: tc.window}})
			gap := time.Second / time.Duration(tc.rate)
			offer(t, tr, clk, b.srv.URL, int(tc.window/gap), gap) // one window of outage
			st := tr.Stats()
			if st.ThrottleProbability < 0.5 {
				t.Fatalf("after the outage: %+v; want the throttle engaged (p >= 0.5)", st)
			}
			p0 := st.ThrottleProbability

			healthy.Store(true)
			start := clk.Now()
			var firstOK, open time.Duration = -1, -1
			limit := 20 * tc.window
			for clk.Now().Sub(start) < limit {
				if offer(t, tr, clk, b.srv.URL, 1, gap) == 1 && firstOK < 0 {
					firstOK = clk.Now().Sub(start)
				}
				if tr.Stats().ThrottleProbability == 0 {
					open = clk.Now().Sub(start)
					break
				}
			}
			if open < 0 || open > 2*tc.window {
				t.Fatalf("throttle opened after %v (-1: not within %v), want within 2 windows: %+v", open, limit, tr.Stats())
			}
			t.Logf("p %.4f → 0: first success after %v, throttle open after %v (window %v)",
				p0, firstOK.Round(time.Millisecond), open.Round(time.Millisecond), tc.window)

			// Once open, it stays open and every call succeeds.
			if ok := offer(t, tr, clk, b.srv.URL, 100, gap); ok != 100 {
				t.Fatalf("%d of 100 calls succeeded after the throttle opened", ok)
			}
			if st := tr.Stats(); st.ThrottleProbability != 0 || st.Tokens != DefaultMaxTokens {
				t.Fatalf("after 100 successes: %+v; want p 0 and a full budget", st)
			}
		})
	}
}
