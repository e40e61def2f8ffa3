package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/h1server"
	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/telemetry"
	"github.com/levee-gw/levee/internal/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkForward drives the handler through real loopback sockets (a
// client, levee's listener, an httptest upstream): the fast path against
// the standard http.Transport path, 64-byte bodies as in the wrk benchmark.
func BenchmarkForward(b *testing.B) {
	body := strings.Repeat("x", 64)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "64")
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, body)
	}))
	defer up.Close()
	for _, bc := range []struct {
		name string
		std  bool
		auth bool // an api_key route, 100,000 apps, a rate limit that admits all
	}{{"fast", false, false}, {"std", true, false}, {"fast+auth+ratelimit", false, true}} {
		b.Run(bc.name, func(b *testing.B) {
			r := newRig(b, up.Listener.Addr().String(), defaultOpts(), bc.std)
			req, _ := http.NewRequest(http.MethodGet, r.front.URL+"/bench?x=1", nil)
			req.Header.Set("Accept", "*/*")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				resp, err := r.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// cannedUpstream serves one canned 64-byte answer per request head on a
// loopback port, parsing nothing and allocating nothing per request, so
// that allocations counted around the handler are the request path's own.
func cannedUpstream(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	tb.Cleanup(func() { ln.Close(); wg.Wait() })
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Length: 64\r\nContent-Type: text/plain\r\nDate: Mon, 30 Nov 2026 20:00:00 GMT\r\n\r\n" +
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					// One read per request head: the client sends each
					// head in one write and waits for the answer.
					if _, err := c.Read(buf); err != nil {
						return
					}
					if _, err := c.Write(answer); err != nil { // not io.WriteString: its conversion allocated per request
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// handlerCase is one way through the request path that BenchmarkHandler
// measures and TestHandlerAllocations holds to its allocation budget.
type handlerCase struct {
	name string
	std  bool // net/http's transport instead of the fast path
	auth bool // an api_key route, 100,000 apps, a rate limit that admits all
	// allocs is the budget, allocations per request; 0: not held to one
	// (net/http's transport allocates per request on its own account,
	// differently by Go version and under the race detector).
	allocs int
	// log turns the access log on (to io.Discard): the budget holds the
	// log's own cost too.
	log bool
	// headers gives the route two header changes of fixed values (a
	// request set and a response set; headers.go).
	headers bool
	// stdctx gives the request a context.WithCancel context (as net/http's
	// server does, for HTTP/2) instead of h1server's request context, the
	// one every HTTP/1 request levee serves has.
	stdctx bool
}

var handlerCases = []handlerCase{
	{"fast", false, false, 4, false, false, false}, {"std", true, false, 0, false, false, false}, {"fast+auth+ratelimit", false, true, 6, false, false, false},
	{"fast+accesslog", false, false, 4, true, false, false}, {"std+accesslog", true, false, 0, true, false, false},
	{"fast+headers", false, false, 4, false, true, false},
	// context.AfterFunc's two allocations for the upstream's abort hook
	{"fast+stdctx", false, false, 6, false, false, true},
}

// handlerServe builds a handler for c against the upstream at addr and
// returns a function serving one request through it (failing tb on any
// status but 200). Everything it builds is released in tb's cleanup.
// Each extra may change the handler's options and returns a hook run on
// the request before each serve (nil: none).
func handlerServe(tb testing.TB, addr string, c handlerCase, extra ...func(*Options) func(*http.Request)) func() {
	tb.Helper()
	reg := prometheus.NewRegistry()
	m, _ := NewMetrics(reg)
	tr := upstream.NewTransport(defaultOpts())
	tb.Cleanup(tr.Close)
	ep := endpoint.New(addr, 1)
	up := (&Upstream{Name: "up", Transport: tr}).WithBalance(&Balance{Endpoints: []*endpoint.Endpoint{ep}, Picker: balance.NewSmoothWeighted([]*endpoint.Endpoint{ep})})
	if c.std {
		up.Transport = tr.Standard()
	}
	rt := &Route{Name: "all", PathPrefix: "/", Upstream: up}
	if c.headers {
		env, _ := NewHeaderOp("X-Env", "prod")
		cache, _ := NewHeaderOp("Cache-Control", "no-store")
		rt.Headers = &Headers{Request: &HeaderOps{Set: []HeaderOp{env}}, Response: &HeaderOps{Set: []HeaderOp{cache}}}
	}
	var key []string
	if c.auth {
		rt.Auth = AuthAPIKey
		key = []string{benchKey(7)}
	}
	o := Options{Metrics: m}
	if c.log {
		al, err := telemetry.NewAccessLog(telemetry.AccessOptions{Writer: io.Discard, Sample2xx: 1, RedactQuery: []string{"token"}}, reg)
		if err != nil {
			tb.Fatal(err)
		}
		done := make(chan struct{})
		go func() { al.Run(); close(done) }()
		tb.Cleanup(func() { al.Close(); <-done })
		o.AccessLog = al
	}
	var hooks []func(*http.Request)
	for _, e := range extra {
		if hook := e(&o); hook != nil {
			hooks = append(hooks, hook)
		}
	}
	h, _ := NewHandler(NewTable([]*Route{rt}, []*Upstream{up}, m), o)
	if c.auth {
		apps, keys := benchApps(tb, 100_000)
		apps[7].Limit = ratelimit.Policy{Rate: mustRate(tb, 1e9, 1e9)}
		h.SwapApps(NewApps(apps, mustIndex(tb, keys), nil))
	}
	ctx, cancel := h1server.NewRequestContext()
	if c.stdctx {
		ctx, cancel = context.WithCancel(context.Background())
	}
	tb.Cleanup(cancel)
	req := httptest.NewRequest(http.MethodGet, "/bench?x=1", nil).WithContext(ctx)
	req.RemoteAddr = "192.0.2.1:1234"
	req.Header.Set("Accept", "*/*")
	req.Header.Set("User-Agent", "wrk")
	w := &benchWriter{h: http.Header{}}
	return func() {
		clear(w.h)
		if key != nil {
			req.Header["X-Api-Key"] = key // the handler hides it from the upstream
		}
		for _, hook := range hooks {
			hook(req)
		}
		h.ServeHTTP(w, req)
		if w.code != 200 {
			tb.Fatalf("status %d", w.code)
		}
	}
}

// BenchmarkHandler isolates levee's own cost: ServeHTTP called directly
// (no client, no front server) against a canned upstream, so allocs/op
// are the request path's own.
func BenchmarkHandler(b *testing.B) {
	addr := cannedUpstream(b)
	for _, c := range handlerCases {
		b.Run(c.name, func(b *testing.B) {
			serve := handlerServe(b, addr, c)
			b.ReportAllocs()
			for b.Loop() {
				serve()
			}
		})
	}
}

// TestHandlerAllocations holds each way through the request path to its
// allocation budget (BenchmarkHandler's figures), so that a change that
// adds an allocation per request (an attempt moved to the heap, a closure
// per request) fails here, not only in a benchmark nobody reran.
func TestHandlerAllocations(t *testing.T) {
	addr := cannedUpstream(t)
	for _, c := range handlerCases {
		if c.allocs == 0 {
			continue
		}
		serve := handlerServe(t, addr, c)
		serve() // the pooled connection, the metrics' children
		budget := c.allocs
		if c.log && raceEnabled {
			budget += 2 // the line buffer and the attempt times, pooled (raceEnabled)
		}
		if got := testing.AllocsPerRun(200, serve); got > float64(budget) {
			t.Errorf("%s: %.1f allocations per request, budget %d", c.name, got, budget)
		}
	}
}

type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }
