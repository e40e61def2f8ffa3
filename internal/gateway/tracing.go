package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/tracing"
	"github.com/prometheus/client_golang/prometheus"
)

// newTracer registers the tracing counters in reg (tracing on or off:
// they exist at 0 from the start) and builds the tracer the tracing block
// asks for; nil when it is off. It starts nothing (startTracer starts its
// exporter, stopTracer stops it) and connects to nothing.
func newTracer(t *config.Tracing, reg prometheus.Registerer, logger *slog.Logger) (*tracing.Tracer, error) {
	m, err := tracing.NewMetrics(reg)
	if err != nil || t == nil {
		return nil, err
	}
	tr, err := tracing.New(tracing.Options{Endpoint: t.Endpoint, Sampling: t.Sampling, ServiceName: t.ServiceName,
		Timeout: t.Timeout, MaxQueue: t.MaxQueue, Metrics: m, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return tr, nil
}

// startTracer starts the exporter's batch goroutine (Start, once).
func (g *Gateway) startTracer() {
	if g.tracer != nil {
		g.tracer.Start()
	}
}

// stopTracer exports the spans still queued and stops the exporter,
// waiting at most the export timeout (the requests are drained by then).
func (g *Gateway) stopTracer() {
	if g.tracer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.fileCfg.Tracing.Timeout+time.Second)
	defer cancel()
	if err := g.tracer.Shutdown(ctx); err != nil {
		g.logger.Warn("tracing: spans not flushed at shutdown", "error", err)
	}
}

// sameTracing reports whether a and b configure the same tracing (which a
// reload cannot change: the tracer is built once, at start, and the
// handler holds it).
func sameTracing(a, b *config.Tracing) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
