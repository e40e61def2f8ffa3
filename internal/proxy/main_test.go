package proxy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// request path must leave no connection reader, timer or hook behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newTestHandler returns a Handler serving routes over ups, with metrics
// in a registry of its own.
func newTestHandler(tb testing.TB, routes []*Route, ups []*Upstream) *Handler {
	tb.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	h, err := NewHandler(NewTable(routes, ups, m), Options{Metrics: m})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}
