package proxy

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/endpoint"
)

// BenchmarkRefuseAtLimit: the handler's whole path for a request its
// upstream's limiter refuses at once (every slot busy, no queue): request
// id, route lookup, admission, the 503 with Retry-After and its metrics.
func BenchmarkRefuseAtLimit(b *testing.B) {
	lim, err := admission.New(admission.Options{MaxConcurrency: 1, QueueTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	hold, err := lim.Acquire(context.Background(), "holder", admission.Normal)
	if err != nil {
		b.Fatal(err)
	}
	defer hold.Done(endpoint.Abandoned)
	up := &Upstream{Name: "up", Admission: lim}
	rt := &Route{Name: "all", PathPrefix: "/", Upstream: up}
	h := newTestHandler(b, []*Route{rt}, []*Upstream{up})
	r, err := http.NewRequest(http.MethodGet, "http://bench/x", nil)
	if err != nil {
		b.Fatal(err)
	}
	r.RemoteAddr = "10.0.0.1:1234"
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, r)
	}
	if s := lim.Stats(); s.ConcurrencyLimit == 0 {
		b.Fatal("nothing was refused")
	}
}
