// Package tracing is levee's OpenTelemetry tracing: one server span per
// request and one client span per upstream attempt, W3C Trace Context
// continued or started, exported over OTLP/HTTP by a batch processor
// with a bounded queue (processor.go).
//
// Sampling is decided here before the SDK sees a request, so that an
// unsampled request costs no span: a valid incoming traceparent's
// sampled flag is obeyed (parent-based), a request without one is a root,
// sampled with the configured ratio. Only sampled requests reach the SDK,
// whose sampler is parent-based over always-on. An unsampled root still
// gets a traceparent (flag 00) toward the upstream, so the backends make
// the same decision and the access log has a trace id.
//
// The package keeps the OpenTelemetry types to itself but for Span, which
// the request path holds and hands back.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a Tracer.
type Options struct {
	// Endpoint is the OTLP/HTTP collector's URL, http or https. With no
	// path (or "/"), spans are posted to <Endpoint>/v1/traces; a path is
	// used as it is.
	Endpoint string
	// Sampling is the share of root requests (no valid incoming
	// traceparent) that are traced, 0 to 1.
	Sampling float64
	// ServiceName is the service.name resource attribute.
	ServiceName string
	// Timeout bounds one export (a batch's POST).
	Timeout time.Duration
	// MaxQueue bounds the spans waiting for export; more are dropped
	// and counted.
	MaxQueue int
	// Metrics counts drops, exports and failures (NewMetrics). Required.
	Metrics *Metrics
	// Logger receives export failures (nil: discard).
	Logger *slog.Logger
	// BatchDelay is the longest a finished span waits before its batch
	// is sent (0: DefaultBatchDelay).
	BatchDelay time.Duration
}

// DefaultBatchDelay is how long a span waits at most for its batch.
const DefaultBatchDelay = time.Second

// maxBatch is the most spans in one export request.
const maxBatch = 512

// Tracer starts and ends levee's spans. Safe for concurrent use.
type Tracer struct {
	ratio    float64
	tracer   trace.Tracer
	provider *sdktrace.TracerProvider
	proc     *processor
	prop     propagation.TraceContext
}

// Span is a started span; nil when the request is not sampled.
type Span = trace.Span

// ExportURL is the URL spans are posted to for endpoint (see
// Options.Endpoint), or an error saying what is wrong with it.
func ExportURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return "", errors.New("must be an http:// or https:// URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New(`must be an http:// or https:// URL`)
	case u.Host == "":
		return "", errors.New("must name a host")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "", errors.New("must not carry user info, a query or a fragment")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// New builds a Tracer exporting to o.Endpoint. It starts no goroutine
// (Start does) and does not connect: a collector that is down costs
// failed exports, counted, never requests.
func New(o Options) (*Tracer, error) {
	if o.Metrics == nil {
		return nil, errors.New("tracing: Options.Metrics is required")
	}
	target, err := ExportURL(o.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("tracing: endpoint %q: %w", o.Endpoint, err)
	}
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(target),
		otlptracehttp.WithTimeout(o.Timeout),
		// One try per batch, bounded by Timeout: the processor's queue,
		// not a retry loop, absorbs a slow collector.
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	delay := o.BatchDelay
	if delay <= 0 {
		delay = DefaultBatchDelay
	}
	proc := newProcessor(exp, o.MaxQueue, maxBatch, delay, o.Timeout, o.Metrics, logger)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithSpanProcessor(proc),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", o.ServiceName))),
	)
	return &Tracer{ratio: o.Sampling, tracer: tp.Tracer("github.com/levee-gw/levee"), provider: tp, proc: proc}, nil
}

// Start starts the exporter's batch goroutine; spans that end before it
// wait in the queue. Shutdown stops it.
func (t *Tracer) Start() { t.proc.start() }

// Shutdown exports what is queued and stops the processor, within ctx.
func (t *Tracer) Shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }

// Request is one request's tracing state.
type Request struct {
	// Span is the server span; nil when the request is not sampled.
	Span Span
	// Ctx carries Span, the parent of the attempts' spans.
	Ctx context.Context
	// TraceID is the request's trace id in hex ("": none), for the
	// access log.
	TraceID string
}

// Begin decides whether a request with header h is traced and starts its
// server span if so. A valid traceparent is kept (and continued when
// sampled); an invalid one, or several, are removed with any tracestate,
// and a root's traceparent (flag 00 when unsampled) is written into h so
// that it goes upstream. Unsampled, Begin allocates at most the new
// traceparent.
func (t *Tracer) Begin(h http.Header) Request {
	v := h["Traceparent"]
	if len(v) == 1 {
		if p, ok := ParseTraceparent(v[0]); ok {
			if !p.Sampled {
				return Request{TraceID: v[0][3:35]} // passes through unchanged
			}
			// The parent as ParseTraceparent read it (not the propagator's
			// Extract, which refuses version-00 flags above 03 and would
			// start another trace than the access log names).
			ctx := trace.ContextWithRemoteSpanContext(context.Background(), remoteParent(p, h))
			ctx, span := t.tracer.Start(ctx, "unrouted", trace.WithSpanKind(trace.SpanKindServer))
			return Request{Span: span, Ctx: ctx, TraceID: v[0][3:35]}
		}
	}
	if v != nil {
		delete(h, "Traceparent")
	}
	if h["Tracestate"] != nil {
		delete(h, "Tracestate") // it belonged to the parent dropped or absent
	}
	if t.ratio > 0 && rand.Float64() < t.ratio {
		ctx, span := t.tracer.Start(context.Background(), "unrouted", trace.WithSpanKind(trace.SpanKindServer))
		return Request{Span: span, Ctx: ctx, TraceID: span.SpanContext().TraceID().String()}
	}
	var tid [16]byte
	var sid [8]byte
	putRandom(tid[:])
	putRandom(sid[:])
	tp := formatTraceparent(tid, sid, false)
	h["Traceparent"] = []string{tp}
	return Request{TraceID: tp[3:35]}
}

// remoteParent is the caller's span context from its traceparent p and
// its tracestate (dropped when malformed, as the propagator does).
func remoteParent(p Parent, h http.Header) trace.SpanContext {
	// The flags the specification defines are kept (sampled, random), as
	// the propagator keeps them; the others are not levee's to pass on.
	flags := trace.TraceFlags(p.Flags) & (trace.FlagsSampled | trace.FlagsRandom)
	cfg := trace.SpanContextConfig{TraceID: p.TraceID, SpanID: p.SpanID, TraceFlags: flags, Remote: true}
	if v := h.Get("Tracestate"); v != "" {
		if ts, err := trace.ParseTraceState(v); err == nil {
			cfg.TraceState = ts
		}
	}
	return trace.NewSpanContext(cfg)
}

// putRandom fills b with random bytes (never all zeros: the ids must not be).
func putRandom(b []byte) {
	for i := 0; i < len(b); i += 8 {
		n := rand.Uint64() | 1
		for j := i; j < i+8 && j < len(b); j++ {
			b[j] = byte(n)
			n >>= 8
		}
	}
}

// ServerEnd is what the server span records when its request ends.
type ServerEnd struct {
	Route, Method, Path, Reason, App, Upstream string
	Status, Attempts                           int
	BytesIn, BytesOut                          int64
}

// EndServer names the server span after the route ("unrouted": none),
// records e and ends it. A status of 500 or more, or a refusal reason,
// marks the span as an error.
func EndServer(s Span, e ServerEnd) {
	name := e.Route
	if name == "" {
		name = "unrouted"
	}
	s.SetName(name)
	s.SetAttributes(
		attribute.String("http.request.method", e.Method),
		attribute.String("levee.route", e.Route),
		attribute.String("url.path", e.Path),
		attribute.Int("http.response.status_code", e.Status),
		attribute.String("levee.upstream", e.Upstream),
		attribute.Int("levee.attempts", e.Attempts),
		attribute.Int64("http.request.body.size", e.BytesIn),
		attribute.Int64("http.response.body.size", e.BytesOut),
	)
	if e.Reason != "" {
		s.SetAttributes(attribute.String("levee.reason", e.Reason))
	}
	if e.App != "" {
		s.SetAttributes(attribute.String("levee.app", e.App))
	}
	if e.Status >= 500 {
		s.SetStatus(codes.Error, e.Reason)
	}
	s.End()
}

// BeginAttempt starts attempt n's client span under the server span in
// parent (Request.Ctx) and writes its traceparent (and the trace's tracestate) into h,
// the headers the attempt sends, so that the endpoint continues the
// trace from it.
func (t *Tracer) BeginAttempt(parent context.Context, h http.Header, addr string, n int) Span {
	ctx, span := t.tracer.Start(parent, "attempt", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("levee.endpoint", addr), attribute.Int("levee.attempt", n)))
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
	return span
}

// AttemptEnd is what an attempt's span records when the attempt ends.
type AttemptEnd struct {
	Status  int    // the endpoint's answer; 0: none
	Failure string // the transport failure class; "": none
	Retried bool   // the request was sent again after this attempt
}

// EndAttempt records e on an attempt's span and ends it.
func EndAttempt(s Span, e AttemptEnd) {
	if e.Status != 0 {
		s.SetAttributes(attribute.Int("http.response.status_code", e.Status))
	}
	if e.Failure != "" {
		s.SetAttributes(attribute.String("levee.failure", e.Failure))
		s.SetStatus(codes.Error, e.Failure)
	} else if e.Status >= 500 {
		s.SetStatus(codes.Error, "")
	}
	s.SetAttributes(attribute.Bool("levee.retried", e.Retried))
	s.End()
}
