package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/tracing"
)

// newTracer builds the tracer the tracing block asks for; nil when it is
// off. It starts nothing (Start starts its exporter, Shutdown stops it
// with stopTracer) and connects to nothing.
func newTracer(t *config.Tracing, m *tracing.Metrics, logger *slog.Logger) (*tracing.Tracer, error) {
	if t == nil {
		return nil, nil
	}
	return tracing.New(tracing.Options{Endpoint: t.Endpoint, Sampling: t.Sampling, ServiceName: t.ServiceName,
		Timeout: t.Timeout, MaxQueue: t.MaxQueue, Metrics: m, Logger: logger})
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
