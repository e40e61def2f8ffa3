package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee-gw/levee/internal/testkit"
)

// backend is a real HTTP server that answers with reply(n, w, r) for its
// n-th request (from 1) and records what it saw.
type backend struct {
	srv   *httptest.Server
	n     atomic.Int64
	mu    sync.Mutex
	seen  []string // Levee-Attempt of each request
	body  []string
	reply func(n int, w http.ResponseWriter, r *http.Request)
}

func newBackend(t *testing.T, reply func(n int, w http.ResponseWriter, r *http.Request)) *backend {
	t.Helper()
	b := &backend{reply: reply}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(b.n.Add(1))
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.seen = append(b.seen, r.Header.Get(AttemptHeader))
		b.body = append(b.body, string(body))
		b.mu.Unlock()
		b.reply(n, w, r)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) requests() int { return int(b.n.Load()) }

func (b *backend) attempts() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seen...)
}

func (b *backend) bodies() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.body...)
}

// status answers code to every request.
func status(code int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// sequence answers codes[n-1], then the last code forever.
func sequence(codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(codes[min(n, len(codes))-1])
	}
}

// opts are test options: a fake clock, a fixed random source, no throttle
// unless the test turns it on, and the backend's own client transport.
func opts(b *backend, clk *fakeClock) Options {
	return Options{
		Base:     b.srv.Client().Transport,
		Clock:    clk,
		Rand:     constRand(0.5),
		Throttle: Throttle{Disabled: true},
	}
}

func do(t *testing.T, tr http.RoundTripper, req *http.Request) (*http.Response, error) {
	t.Helper()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

func newReq(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestRetriesOnlyIdempotentRequests(t *testing.T) {
	cases := []struct {
		method string
		header string // idempotency header set to "k-1", if any
		want   int    // requests the server sees
	}{
		{"GET", "", 3},
		{"HEAD", "", 3},
		{"OPTIONS", "", 3},
		{"TRACE", "", 3},
		{"PUT", "", 3},
		{"DELETE", "", 3},
		{"POST", "", 1},
		{"PATCH", "", 1},
		{"CONNECTISH", "", 1},
		{"POST", "Idempotency-Key", 3},
		{"PATCH", "X-Idempotency-Key", 3},
	}
	for _, tc := range cases {
		t.Run(tc.method+"/"+tc.header, func(t *testing.T) {
			b := newBackend(t, status(http.StatusBadGateway))
			tr := mustNew(t, opts(b, newFakeClock()))
			req := newReq(t, tc.method, b.srv.URL, nil)
			if tc.header != "" {
				req.Header.Set(tc.header, "k-1")
			}
			resp, err := do(t, tr, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("status %d, want the last answer 502", resp.StatusCode)
			}
			if got := b.requests(); got != tc.want {
				t.Errorf("server saw %d requests, want %d", got, tc.want)
			}
		})
	}
}

// TestPostWithoutKeyIsNeverRetried pins the retry-storm lesson: a request
// that may not be idempotent and was sent is sent exactly once, whether the
// server said 503 or the connection broke after it was written.
func TestPostWithoutKeyIsNeverRetried(t *testing.T) {
	b := newBackend(t, status(http.StatusServiceUnavailable))
	tr := mustNew(t, opts(b, newFakeClock()))
	resp, err := do(t, tr, newReq(t, "POST", b.srv.URL, strings.NewReader("order=1")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || b.requests() != 1 {
		t.Fatalf("status %d after %d requests; want 503 after exactly 1", resp.StatusCode, b.requests())
	}
	if s := tr.Stats(); s.Attempts != 1 || s.Retries != 0 {
		t.Fatalf("stats %+v", s)
	}

	hang := newBackend(t, func(_ int, w http.ResponseWriter, _ *http.Request) { hijackClose(w) })
	tr = mustNew(t, opts(hang, newFakeClock()))
	if _, err := do(t, tr, newReq(t, "POST", hang.srv.URL, strings.NewReader("order=1"))); err == nil {
		t.Fatal("want the connection error")
	}
	if hang.requests() != 1 {
		t.Fatalf("server saw %d requests, want 1", hang.requests())
	}
}

func hijackClose(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func TestLeveeAttemptHeader(t *testing.T) {
	b := newBackend(t, sequence(503, 502, 200))
	tr := mustNew(t, opts(b, newFakeClock()))
	req := newReq(t, "GET", b.srv.URL, nil)
	req.Header.Set(AttemptHeader, "9") // a caller's value is replaced
	req.Header.Set("X-Caller", "kept")
	resp, err := do(t, tr, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := strings.Join(b.attempts(), ","); got != "1,2,3" {
		t.Fatalf("server saw Levee-Attempt %s, want 1,2,3", got)
	}
	if req.Header.Get(AttemptHeader) != "9" || len(req.Header) != 2 {
		t.Fatalf("caller's request was modified: %v", req.Header)
	}
	if s := tr.Stats(); s.Requests != 1 || s.Attempts != 3 || s.Retries != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Run("seconds", func(t *testing.T) {
		b := newBackend(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(503)
				return
			}
			w.WriteHeader(200)
		})
		clk := newFakeClock()
		tr := mustNew(t, opts(b, clk))
		resp, err := do(t, tr, newReq(t, "GET", b.srv.URL, nil))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		if s := clk.Sleeps(); len(s) != 1 || s[0] < 7*time.Second {
			t.Fatalf("slept %v, want one sleep of at least 7s", s)
		}
	})
	t.Run("http-date on 429", func(t *testing.T) {
		clk := newFakeClock()
		b := newBackend(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				w.Header().Set("Retry-After", clk.Now().Add(9*time.Second).UTC().Format(http.TimeFormat))
				w.WriteHeader(429)
				return
			}
			w.WriteHeader(200)
		})
		tr := mustNew(t, opts(b, clk))
		resp, err := do(t, tr, newReq(t, "GET", b.srv.URL, nil))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		if s := clk.Sleeps(); len(s) != 1 || s[0] < 9*time.Second {
			t.Fatalf("slept %v, want one sleep of at least 9s", s)
		}
	})
	t.Run("backoff longer than retry-after wins", func(t *testing.T) {
		b := newBackend(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "1")
			sequence(503, 200)(n, w, nil)
		})
		clk := newFakeClock()
		o := opts(b, clk)
		o.Backoff = Backoff{Base: 10 * time.Second, Max: 10 * time.Second}
		tr := mustNew(t, o)
		if resp, err := do(t, tr, newReq(t, "GET", b.srv.URL, nil)); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		if s := clk.Sleeps(); len(s) != 1 || s[0] != 5*time.Second {
			t.Fatalf("slept %v, want the 5s backoff", s)
		}
	})
	t.Run("longer than MaxRetryAfter is returned as is", func(t *testing.T) {
		b := newBackend(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "31")
			w.WriteHeader(503)
			io.WriteString(w, "busy")
		})
		clk := newFakeClock()
		tr := mustNew(t, opts(b, clk))
		resp, err := (&http.Client{Transport: tr}).Get(b.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "31" || string(body) != "busy" {
			t.Fatalf("got %d %q %q, want the server's answer untouched", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if b.requests() != 1 || len(clk.Sleeps()) != 0 || tr.Stats().RetryAfterTooLong != 1 {
			t.Fatalf("%d requests, sleeps %v, stats %+v", b.requests(), clk.Sleeps(), tr.Stats())
		}
	})
	t.Run("past the deadline is returned as is", func(t *testing.T) {
		b := newBackend(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "7200")
			w.WriteHeader(503)
		})
		clk := testkit.NewClock(time.Now()) // compared with a real deadline
		o := opts(b, clk)
		o.MaxRetryAfter = 3 * time.Hour
		tr := mustNew(t, o)
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Hour))
		defer cancel()
		resp, err := do(t, tr, newReq(t, "GET", b.srv.URL, nil).WithContext(ctx))
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("%v %v", resp, err)
		}
		if b.requests() != 1 || len(clk.Sleeps()) != 0 {
			t.Fatalf("%d requests, sleeps %v; want 1 and none", b.requests(), clk.Sleeps())
		}
	})
	t.Run("unparsable is ignored", func(t *testing.T) {
		b := newBackend(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "soon")
			if n == 1 {
				w.WriteHeader(503)
				return
			}
			w.WriteHeader(200)
		})
		clk := newFakeClock()
		tr := mustNew(t, opts(b, clk))
		if resp, err := do(t, tr, newReq(t, "GET", b.srv.URL, nil)); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		if s := clk.Sleeps(); len(s) != 1 || s[0] != 50*time.Millisecond {
			t.Fatalf("slept %v, want the backoff 50ms (rand 0.5 of 100ms)", s)
		}
	})
}

// signalClock is the real clock that reports when a sleep starts.
type signalClock struct {
	realClock
	started chan time.Duration
}

func (c signalClock) Sleep(ctx context.Context, d time.Duration) error {
	c.started <- d
	return c.realClock.Sleep(ctx, d)
}

// TestCancelDuringBackoff uses the real clock: a 30-minute backoff must end
// as soon as the request's context is cancelled, with no goroutine left.
func TestCancelDuringBackoff(t *testing.T) {
	b := newBackend(t, status(http.StatusBadGateway))
	clk := signalClock{started: make(chan time.Duration, 1)}
	tr := mustNew(t, Options{
		Base:    b.srv.Client().Transport,
		Clock:   clk,
		Rand:    constRand(0.5),
		Backoff: Backoff{Base: time.Hour, Max: time.Hour},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if d := <-clk.started; d != 30*time.Minute {
			t.Errorf("backoff %v, want 30m", d)
		}
		cancel()
	}()
	start := time.Now()
	_, err := do(t, tr, newReq(t, "GET", b.srv.URL, nil).WithContext(ctx))
	elapsed := time.Since(start)
	<-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if elapsed > 10*time.Second {
		t.Fatalf("returned after %v", elapsed)
	}
	if b.requests() != 1 {
		t.Fatalf("server saw %d requests, want 1", b.requests())
	}
	b.srv.Close()
	goleak.VerifyNone(t)
}

func TestRealClockSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (realClock{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled sleep: %v", err)
	}
	if err := (realClock{}).Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("zero sleep on a cancelled context: %v", err)
	}
	if err := (realClock{}).Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("short sleep: %v", err)
	}
}

// trackedBody is a request body without GetBody that records Close.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

func TestBodyReplay(t *testing.T) {
	t.Run("GetBody rewinds each attempt", func(t *testing.T) {
		b := newBackend(t, sequence(503, 502, 200))
		tr := mustNew(t, opts(b, newFakeClock()))
		req := newReq(t, "PUT", b.srv.URL, strings.NewReader("payload-xyz"))
		if resp, err := do(t, tr, req); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		if got := strings.Join(b.bodies(), ","); got != "payload-xyz,payload-xyz,payload-xyz" {
			t.Fatalf("server saw bodies %q", got)
		}
	})
	t.Run("keyed POST", func(t *testing.T) {
		b := newBackend(t, sequence(504, 200))
		tr := mustNew(t, opts(b, newFakeClock()))
		req := newReq(t, "POST", b.srv.URL, strings.NewReader(`{"a":1}`))
		req.Header.Set("Idempotency-Key", "abc")
		if resp, err := do(t, tr, req); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		if got := strings.Join(b.bodies(), ","); got != `{"a":1},{"a":1}` {
			t.Fatalf("server saw bodies %q", got)
		}
	})
	t.Run("no GetBody: sent once", func(t *testing.T) {
		b := newBackend(t, status(503))
		tr := mustNew(t, opts(b, newFakeClock()))
		body := &trackedBody{Reader: strings.NewReader("stream")}
		req := newReq(t, "PUT", b.srv.URL, body)
		if req.GetBody != nil {
			t.Fatal("test setup: GetBody is set")
		}
		if resp, err := do(t, tr, req); err != nil || resp.StatusCode != 503 {
			t.Fatalf("%v %v", resp, err)
		}
		if b.requests() != 1 || !body.closed.Load() {
			t.Fatalf("%d requests, body closed %v; want 1 and true", b.requests(), body.closed.Load())
		}
	})
}

func TestNetworkErrorsRetried(t *testing.T) {
	t.Run("connection closed before a response", func(t *testing.T) {
		b := newBackend(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n < 3 {
				hijackClose(w)
				return
			}
			w.WriteHeader(200)
		})
		tr := mustNew(t, opts(b, newFakeClock()))
		if resp, err := do(t, tr, newReq(t, "GET", b.srv.URL, nil)); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		if got := strings.Join(b.attempts(), ","); got != "1,2,3" {
			t.Fatalf("server saw attempts %s", got)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		tr := mustNew(t, Options{Base: base, Clock: newFakeClock(), Rand: constRand(0), Throttle: Throttle{Disabled: true}})
		_, err = do(t, tr, newReq(t, "GET", "http://"+addr, nil))
		var op *net.OpError
		if !errors.As(err, &op) {
			t.Fatalf("err %v, want a *net.OpError", err)
		}
		if s := tr.Stats(); s.Attempts != 3 {
			t.Fatalf("stats %+v, want 3 attempts", s)
		}
	})
	t.Run("unsupported scheme is not retried", func(t *testing.T) {
		tr := mustNew(t, Options{Clock: newFakeClock()})
		if _, err := tr.RoundTrip(newReq(t, "GET", "gopher://example.invalid/", nil)); err == nil {
			t.Fatal("want an error")
		}
		if s := tr.Stats(); s.Attempts != 1 || s.Tokens != 10 {
			t.Fatalf("stats %+v, want 1 attempt and an untouched budget", s)
		}
	})
}

func TestThrottledFirstAttempt(t *testing.T) {
	b := newBackend(t, status(503))
	o := opts(b, newFakeClock())
	o.Throttle = Throttle{}
	o.Rand = constRand(0) // refuse whenever p > 0
	tr := mustNew(t, o)
	if resp, err := do(t, tr, newReq(t, "GET", b.srv.URL, nil)); err != nil || resp.StatusCode != 503 {
		t.Fatalf("first call: %v %v", resp, err)
	}
	// Window: 1 request (the attempt; the refused retry is not counted), 0 accepts.
	if s := tr.Stats(); s.Attempts != 1 || s.Throttled != 1 || s.WindowRequests != 1 || s.ThrottleProbability != 1.0/2 {
		t.Fatalf("stats %+v", s)
	}
	body := &trackedBody{Reader: strings.NewReader("x")}
	req := newReq(t, "POST", b.srv.URL, body)
	_, err := do(t, tr, req)
	if !errors.Is(err, ErrThrottled) {
		t.Fatalf("err %v, want ErrThrottled", err)
	}
	if b.requests() != 1 || !body.closed.Load() {
		t.Fatalf("server saw %d requests (want 1), body closed %v", b.requests(), body.closed.Load())
	}
	if s := tr.Stats(); s.Throttled != 2 || s.WindowRequests != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestIntermediateBodyDrainIsBounded: a retried answer's body is read only
// up to drainLimit before it is closed, even when it never ends.
func TestIntermediateBodyDrainIsBounded(t *testing.T) {
	const huge = 256 << 20
	written := make(chan int64, 1)
	b := newBackend(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n > 1 {
			w.WriteHeader(200)
			return
		}
		w.WriteHeader(503)
		chunk := make([]byte, 32<<10)
		var total int64
		for total < huge {
			m, err := w.Write(chunk)
			total += int64(m)
			if err != nil {
				break
			}
		}
		written <- total
	})
	tr := mustNew(t, opts(b, newFakeClock()))
	if resp, err := do(t, tr, newReq(t, "GET", b.srv.URL, nil)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	select {
	case total := <-written:
		if total >= huge {
			t.Fatalf("the client read the whole %d-byte body", total)
		}
		t.Logf("server wrote %d bytes before the client closed", total)
	case <-time.After(30 * time.Second):
		t.Fatal("the first handler never finished: the body was not closed")
	}
}

// TestConcurrentUse exercises the shared state under -race.
func TestConcurrentUse(t *testing.T) {
	b := newBackend(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader([]int{200, 503, 502, 200}[n%4])
	})
	tr := mustNew(t, Options{Base: b.srv.Client().Transport, Backoff: Backoff{Base: time.Microsecond, Max: time.Microsecond}})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range 20 {
				resp, err := do(t, tr, newReq(t, "GET", b.srv.URL, nil))
				if err != nil && !errors.Is(err, ErrThrottled) {
					t.Error(err)
				} else if err == nil && resp.StatusCode == 0 {
					t.Error("no status")
				}
				_ = tr.Stats()
			}
		})
	}
	wg.Wait()
	s := tr.Stats()
	if s.Requests != 400 || s.Attempts != uint64(b.requests()) || s.Attempts > s.Requests*3 {
		t.Fatalf("stats %+v, server saw %d", s, b.requests())
	}
	t.Logf("concurrent: %+v", s)
}
