package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/client"
	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// noWaitClock is the client's clock with its backoff waits skipped.
type noWaitClock struct{}

func (noWaitClock) Now() time.Time { return time.Now() }
func (noWaitClock) Sleep(ctx context.Context, d time.Duration) error {
	return ctx.Err()
}

// TestIdempotencyClientAgreesWithProxy: the public client and the proxy
// retry the same requests, by the one rule (internal/idempotency), on a
// table of methods × Idempotency-Key absent, empty, present. Each side
// talks to a real backend that answers 502 and counts what it is sent:
// three requests for a retried request (three attempts), one otherwise.
// An empty key is no key: a POST or PATCH carrying one is sent once.
func TestIdempotencyClientAgreesWithProxy(t *testing.T) {
	var hits atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer backend.Close()

	// The proxy: one route, three attempts on 502, bodies buffered.
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	tr := upstream.NewTransport(defaultOpts())
	defer tr.Close()
	ep := endpoint.New(strings.TrimPrefix(backend.URL, "http://"), 1)
	up := (&Upstream{Name: "up", Transport: tr}).WithBalance(&Balance{Endpoints: []*endpoint.Endpoint{ep}, Picker: balance.NewSmoothWeighted([]*endpoint.Endpoint{ep})})
	rt := &Route{Name: "all", PathPrefix: "/", Upstream: up, Retry: &RetryPolicy{Attempts: 3, OnStatus: []int{http.StatusBadGateway}, ReplayBodyLimit: 1 << 10}}
	h, err := NewHandler(NewTable([]*Route{rt}, []*Upstream{up}, m), Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(h)
	defer front.Close()
	plain := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 10 * time.Second}
	defer plain.CloseIdleConnections()

	const sent, retried = 1, 3
	for _, method := range []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "POST", "PATCH"} {
		for _, key := range []string{"absent", "empty", "present"} {
			want := retried
			if (method == "POST" || method == "PATCH") && key != "present" {
				want = sent
			}
			newReq := func(url string) *http.Request {
				var body io.Reader
				if method != "GET" && method != "HEAD" {
					body = strings.NewReader("order=1")
				}
				req, err := http.NewRequest(method, url, body)
				if err != nil {
					t.Fatal(err)
				}
				switch key {
				case "empty":
					req.Header["Idempotency-Key"] = []string{""}
				case "present":
					req.Header["Idempotency-Key"] = []string{"k-1"}
				}
				return req
			}
			count := func(rt http.RoundTripper, url string) int64 {
				before := hits.Load()
				resp, err := rt.RoundTrip(newReq(url))
				if err != nil {
					t.Fatalf("%s with key %s: %v", method, key, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadGateway {
					t.Fatalf("%s with key %s: status %d, want the last answer 502", method, key, resp.StatusCode)
				}
				return hits.Load() - before
			}
			viaProxy := count(plain.Transport, front.URL+"/x")
			base := &http.Transport{DisableCompression: true}
			ct, err := client.New(client.Options{Base: base, MaxAttempts: 3, RetryOn: []int{http.StatusBadGateway},
				Clock: noWaitClock{}, Throttle: client.Throttle{Disabled: true}})
			if err != nil {
				t.Fatal(err)
			}
			viaClient := count(ct, backend.URL+"/x")
			base.CloseIdleConnections()
			if viaProxy != viaClient || viaProxy != int64(want) {
				t.Errorf("%s, Idempotency-Key %s: the proxy sent %d, the client %d; want %d each", method, key, viaProxy, viaClient, want)
			}
		}
	}
}
