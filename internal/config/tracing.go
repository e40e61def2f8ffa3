package config

import (
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/tracing"
)

// Tracing configures OpenTelemetry tracing (`tracing`, optional; see
// docs/tracing.md). nil, the default (no `tracing` block), means off: no
// span, no exporter, no cost on the request path.
type Tracing struct {
	// Endpoint is the OTLP/HTTP collector's URL (`endpoint`, required),
	// http:// or https://; spans are posted to <endpoint>/v1/traces when
	// the URL has no path, to the path as written otherwise.
	Endpoint string
	// Sampling is the share of requests without a valid incoming
	// traceparent that are traced (`sampling`, 0 to 1). A valid incoming
	// traceparent's sampled flag decides for its request. Default
	// DefaultTracingSampling (0.01); 0 traces only what callers sampled.
	Sampling float64
	// ServiceName is the spans' service.name (`service_name`). Default
	// DefaultTracingServiceName ("levee").
	ServiceName string
	// Timeout bounds one export request (`timeout`). Default
	// DefaultTracingTimeout (10s).
	Timeout time.Duration
	// MaxQueue bounds the finished spans waiting for export (`max_queue`,
	// 1 to MaxTracingQueue); more are dropped and counted in
	// levee_tracing_spans_dropped_total. Default DefaultTracingMaxQueue
	// (2048).
	MaxQueue int
}

// MaxTracingQueue bounds tracing.max_queue (each queued span holds its
// attributes in memory, about a kilobyte).
const MaxTracingQueue = 1 << 20

func defaultTracing() *Tracing {
	return engine.WithDefaults(tracingBlock, &Tracing{})
}

var tracingBlock = engine.NewBlock(
	engine.Field{Name: "endpoint", Kind: engine.KindString, Required: true, Doc: "OTLP/HTTP collector URL; spans go to <endpoint>/v1/traces when it has no path",
		Check: checkTracingEndpoint, Bind: engine.At(func(t *Tracing) *string { return &t.Endpoint })},
	engine.Field{Name: "sampling", Kind: engine.KindNumber, Flo: 0, Fhi: 1, Def: DefaultTracingSampling,
		Doc:  "share of requests without a valid incoming traceparent traced, 0 to 1",
		Bind: engine.At(func(t *Tracing) *float64 { return &t.Sampling })},
	engine.Field{Name: "service_name", Kind: engine.KindString, NonEmpty: true, Def: DefaultTracingServiceName, Doc: "the spans' service.name",
		Bind: engine.At(func(t *Tracing) *string { return &t.ServiceName })},
	engine.Field{Name: "timeout", Kind: engine.KindDuration, Def: DefaultTracingTimeout, Doc: "bound of one export request",
		Bind: engine.At(func(t *Tracing) *time.Duration { return &t.Timeout })},
	engine.Field{Name: "max_queue", Kind: engine.KindInt, Lo: 1, Hi: MaxTracingQueue, Def: DefaultTracingMaxQueue,
		Doc:  "finished spans waiting for export; more are dropped and counted",
		Bind: engine.At(func(t *Tracing) *int { return &t.MaxQueue })},
)

// checkTracingEndpoint takes the URL as levee run will (tracing.ExportURL).
var checkTracingEndpoint = engine.ProblemOf(func(s string) string {
	if _, err := tracing.ExportURL(s); err != nil {
		return err.Error()
	}
	return ""
})

const (
	DefaultTracingSampling    = 0.01
	DefaultTracingServiceName = "levee"
	DefaultTracingTimeout     = 10 * time.Second
	DefaultTracingMaxQueue    = 2048
)
