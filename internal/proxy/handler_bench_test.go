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
	"github.com/levee-gw/levee/internal/ratelimit"
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

// BenchmarkHandler isolates levee's own cost: ServeHTTP called directly
// (no client, no front server) against a canned upstream that parses
// nothing and allocates nothing per request, so allocs/op are the request
// path's own.
func BenchmarkHandler(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	const answer = "HTTP/1.1 200 OK\r\nContent-Length: 64\r\nContent-Type: text/plain\r\nDate: Mon, 30 Nov 2026 20:00:00 GMT\r\n\r\n" +
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
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
					if _, err := io.WriteString(c, answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	for _, bc := range []struct {
		name string
		std  bool
		auth bool // an api_key route, 100,000 apps, a rate limit that admits all
	}{{"fast", false, false}, {"std", true, false}, {"fast+auth+ratelimit", false, true}} {
		b.Run(bc.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			m, _ := NewMetrics(reg)
			tr := upstream.NewTransport(defaultOpts())
			defer tr.Close()
			ep := endpoint.New(ln.Addr().String(), 1)
			up := (&Upstream{Name: "up", Transport: tr}).WithBalance(&Balance{Endpoints: []*endpoint.Endpoint{ep}, Picker: balance.NewSmoothWeighted([]*endpoint.Endpoint{ep})})
			if bc.std {
				up.Transport = tr.Standard()
			}
			rt := &Route{Name: "all", PathPrefix: "/", Upstream: up}
			var key []string
			if bc.auth {
				rt.Auth = AuthAPIKey
				key = []string{benchKey(7)}
			}
			h, _ := NewHandler(NewTable([]*Route{rt}, []*Upstream{up}, m), Options{Metrics: m})
			if bc.auth {
				apps, keys := benchApps(b, 100_000)
				apps[7].Limit = ratelimit.Policy{Rate: mustRate(b, 1e9, 1e9)}
				h.SwapApps(NewApps(apps, mustIndex(b, keys), nil))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := httptest.NewRequest(http.MethodGet, "/bench?x=1", nil).WithContext(ctx)
			req.RemoteAddr = "192.0.2.1:1234"
			req.Header.Set("Accept", "*/*")
			req.Header.Set("User-Agent", "wrk")
			w := &benchWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				if key != nil {
					req.Header["X-Api-Key"] = key // the handler hides it from the upstream
				}
				h.ServeHTTP(w, req)
				if w.code != 200 {
					b.Fatalf("status %d", w.code)
				}
			}
		})
	}
}

type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }
