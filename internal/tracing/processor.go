package tracing

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Metrics are the tracing exporter's counters. They are registered
// whether tracing is on or not, so the series exist at 0 from the start.
type Metrics struct {
	dropped, exported, failed prometheus.Counter
}

// NewMetrics registers the tracing counters in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "levee_tracing_spans_dropped_total",
			Help: "Finished spans dropped because the export queue was full (or tracing was shutting down)."}),
		exported: prometheus.NewCounter(prometheus.CounterOpts{Name: "levee_tracing_spans_exported_total",
			Help: "Spans the OTLP collector accepted."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "levee_tracing_spans_failed_total",
			Help: "Spans lost because their export failed (collector down, slow past the timeout, or refusing)."}),
	}
	for _, c := range []prometheus.Collector{m.dropped, m.exported, m.failed} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// processor is a batch span processor with a bounded queue: OnEnd never
// blocks (a full queue drops the span and counts it), one goroutine sends
// batches of at most maxBatch spans when one is full or delay after its
// first span, each export bounded by timeout, one at a time.
type processor struct {
	exp     sdktrace.SpanExporter
	queue   chan sdktrace.ReadOnlySpan // the bound: MaxQueue spans
	batch   int
	delay   time.Duration
	timeout time.Duration
	m       *Metrics
	logger  *slog.Logger

	started  atomic.Bool
	stopped  atomic.Bool
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	// failing is true from a failed export to the next good one, so that
	// a collector that is down logs once, not once per batch.
	failing bool
}

func newProcessor(exp sdktrace.SpanExporter, queue, batch int, delay, timeout time.Duration, m *Metrics, logger *slog.Logger) *processor {
	if queue < 1 {
		queue = 1
	}
	p := &processor{exp: exp, queue: make(chan sdktrace.ReadOnlySpan, queue), batch: batch, delay: delay, timeout: timeout,
		m: m, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	return p
}

// start starts the batch goroutine (once); Shutdown stops it.
func (p *processor) start() {
	if p.started.CompareAndSwap(false, true) {
		go p.run()
	}
}

func (p *processor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (p *processor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() || p.stopped.Load() {
		if p.stopped.Load() {
			p.m.dropped.Inc()
		}
		return
	}
	select {
	case p.queue <- s:
	default:
		p.m.dropped.Inc()
	}
}

// run batches the queue until stop, then sends what is queued.
func (p *processor) run() {
	defer close(p.done)
	buf := make([]sdktrace.ReadOnlySpan, 0, p.batch)
	timer := time.NewTimer(p.delay)
	timer.Stop()
	for {
		select {
		case s := <-p.queue:
			if len(buf) == 0 {
				timer.Reset(p.delay)
			}
			if buf = append(buf, s); len(buf) == p.batch {
				timer.Stop()
				buf = p.export(buf)
			}
		case <-timer.C:
			buf = p.export(buf)
		case <-p.stop:
			timer.Stop()
			// What is queued now, at most the queue's capacity.
			for n := len(p.queue); n > 0; n-- {
				if buf = append(buf, <-p.queue); len(buf) == p.batch {
					buf = p.export(buf)
				}
			}
			p.export(buf)
			return
		}
	}
}

// export sends buf (when not empty) and returns it emptied.
func (p *processor) export(buf []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(buf) == 0 {
		return buf
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	err := p.exp.ExportSpans(ctx, buf)
	cancel()
	if err != nil {
		p.m.failed.Add(float64(len(buf)))
		if !p.failing {
			p.logger.Warn("tracing: exporting spans failed; counting further failures in levee_tracing_spans_failed_total", "spans", len(buf), "error", err)
		}
		p.failing = true
	} else {
		p.m.exported.Add(float64(len(buf)))
		p.failing = false
	}
	clear(buf)
	return buf[:0]
}

// Shutdown sends what is queued and shuts the exporter down, within ctx.
func (p *processor) Shutdown(ctx context.Context) error {
	p.stopOnce.Do(func() {
		p.stopped.Store(true)
		close(p.stop)
	})
	if !p.started.Load() {
		return p.exp.Shutdown(ctx)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return p.exp.Shutdown(ctx)
}

// ForceFlush is not used by levee; queued spans go out within the delay.
func (p *processor) ForceFlush(context.Context) error { return nil }
