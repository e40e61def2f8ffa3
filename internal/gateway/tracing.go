package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/tracing"
)

// newTracer builds the tracer the tracing block asks for, counting in m
// (registered once per process, obsState); nil when it is off. It starts
// nothing (Start starts its exporter, stopTracer stops it) and connects
// to nothing.
func newTracer(t *config.Tracing, m *tracing.Metrics, logger *slog.Logger) (*tracing.Tracer, error) {
	if t == nil {
		return nil, nil
	}
	tr, err := tracing.New(tracing.Options{Endpoint: t.Endpoint, Sampling: t.Sampling, ServiceName: t.ServiceName,
		Timeout: t.Timeout, MaxQueue: t.MaxQueue, Metrics: m, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return tr, nil
}

// stopTracer exports the spans still queued on tr and stops its exporter,
// waiting at most t's export timeout and a second (the requests are
// drained by then, or tr was replaced by a reload). nil tr: nothing.
func (g *Gateway) stopTracer(tr *tracing.Tracer, t *config.Tracing) {
	if tr == nil || t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.Timeout+time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		g.logger.Warn("tracing: spans not flushed at shutdown", "endpoint", t.Endpoint, "error", err)
	}
}

// sameTracing reports whether a and b configure the same tracing (a
// reload that keeps it keeps the tracer and its queued spans).
func sameTracing(a, b *config.Tracing) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
