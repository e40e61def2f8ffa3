package config

import (
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// The log, metrics and profiles blocks (`log`, `metrics`, `profiles`);
// the access log's own block is accesslog.go's.

const maxMetricsAppLabels = 1000

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	logBlock = engine.NewBlock(
		engine.Field{Name: "level", Kind: engine.KindEnum, Enum: logLevels, Def: DefaultLogLevel, Doc: "lowest level logged",
			Bind: engine.At(func(l *Log) *string { return &l.Level })},
		engine.Field{Name: "access", Kind: engine.KindEither, Def: DefaultLogAccess, Doc: "whether each request is logged: true, false, or the access log's settings (which turn it on)",
			Either: []engine.Field{{Kind: engine.KindBool}, {Kind: engine.KindBlock, Sub: accessLogBlock}}},
	)
	profilesBlock = engine.NewBlock(
		engine.Field{Name: "enabled", Kind: engine.KindBool, Def: DefaultProfilesEnabled, Doc: "whether levee captures CPU profiles by itself",
			Bind: engine.At(func(p *Profiles) *bool { return &p.Enabled })},
		engine.Field{Name: "cpu_threshold", Kind: engine.KindFraction, Def: DefaultProfilesCPUThreshold, Doc: "share of GOMAXPROCS's CPU above which the process is busy",
			Bind: engine.At(func(p *Profiles) *float64 { return &p.CPUThreshold })},
		engine.Field{Name: "sustain", Kind: engine.KindDuration, Def: DefaultProfilesSustain, Doc: "how long CPU use stays above the threshold before a capture; 1s to 1h",
			Check: engine.CheckDurationWithin(time.Second, time.Hour), Bind: engine.At(func(p *Profiles) *time.Duration { return &p.Sustain })},
		engine.Field{Name: "on_shedding", Kind: engine.KindBool, Def: DefaultProfilesOnShedding, Doc: "also capture when admission starts refusing requests",
			Bind: engine.At(func(p *Profiles) *bool { return &p.OnShedding })},
		engine.Field{Name: "interval", Kind: engine.KindDuration, Def: DefaultProfilesInterval, Doc: "least time between two captures; 1s to 24h",
			Check: engine.CheckDurationWithin(time.Second, 24*time.Hour), Bind: engine.At(func(p *Profiles) *time.Duration { return &p.Interval })},
		engine.Field{Name: "duration", Kind: engine.KindDuration, Def: DefaultProfilesDuration, Doc: "how long each CPU profile records; 100ms to 5m",
			Check: engine.CheckDurationWithin(100*time.Millisecond, 5*time.Minute), Bind: engine.At(func(p *Profiles) *time.Duration { return &p.Duration })},
		engine.Field{Name: "keep", Kind: engine.KindInt, Lo: 1, Hi: 1000, Def: DefaultProfilesKeep, Doc: "captures kept, the newest",
			Bind: engine.At(func(p *Profiles) *int { return &p.Keep })},
		engine.Field{Name: "max_bytes", Kind: engine.KindSize, Lo: 1 << 20, Hi: 16 << 30, Def: int64(DefaultProfilesMaxBytes), Doc: "the captures' files together; the oldest go first",
			Bind: engine.At(func(p *Profiles) *int64 { return &p.MaxBytes })},
	)
	metricsBlock = engine.NewBlock(
		engine.Field{Name: "app_labels", Kind: engine.KindInt, Lo: 0, Hi: maxMetricsAppLabels, Def: DefaultMetricsAppLabels,
			Doc:  "apps given their own metric label; the rest share one",
			Bind: engine.At(func(m *Metrics) *int { return &m.AppLabels })},
		engine.Field{Name: "endpoint_labels", Kind: engine.KindInt, Lo: 0, Hi: maxMetricsAppLabels, Def: DefaultMetricsEndpointLabels,
			Doc:  "endpoints of one upstream given their own metric label; the rest share one",
			Bind: engine.At(func(m *Metrics) *int { return &m.EndpointLabels })},
	)
)

// log reads `log`: level, and access as true, false or a block.
func (p *parser) log(l *Log, n *yaml.Node) {
	f, ok := p.Block("log", n, logBlock)
	if !ok {
		return
	}
	p.Bind(f, n, "log", logBlock, l) // level
	v := f["access"]
	switch {
	case v == nil, v.Kind == yaml.AliasNode:
	case v.Kind == yaml.MappingNode:
		l.Access = true
		p.accessLog(&l.AccessLog, v)
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool":
		l.Access, _ = p.Boolean("log.access", v)
	default:
		p.Add(v, "log.access", "must be true, false or a mapping (output, sample_2xx, redact_query), got %s", engine.Describe(v))
	}
}

// Log configures logging (`log`).
type Log struct {
	// Level is the lowest level logged: "debug", "info", "warn" or "error"
	// (`level`). Default DefaultLogLevel ("info").
	Level string
	// Access turns the per-request access log on (`access`: true, false,
	// or a block of settings, which turns it on). Default
	// DefaultLogAccess (true).
	Access bool
	// AccessLog is the access log's settings (`access` as a block); their
	// defaults with `access: true` or omitted (accesslog.go).
	AccessLog AccessLog
}

// Metrics configures the metrics levee reports (`metrics`).
type Metrics struct {
	// AppLabels is the most apps with an app label of their own in
	// levee_app_requests_total; the others are summed under
	// app="other" (`app_labels`, a whole number 0 to 1000). Default
	// DefaultMetricsAppLabels (50). It bounds the series an operator's
	// Prometheus receives however many apps exist.
	AppLabels int
	// EndpointLabels is the most endpoints of one upstream with an
	// endpoint label of their own in the levee_endpoint_* series; the
	// others are summed under endpoint="other" (`endpoint_labels`, a whole
	// number 0 to 1000; 0: all summed). Default
	// DefaultMetricsEndpointLabels (50). It bounds the series a large
	// discovered upstream sends to Prometheus.
	EndpointLabels int
}

// Profiles configures the CPU profiles and goroutine dumps levee captures
// by itself under state_dir/profiles (`profiles`; see docs/operations.md).
type Profiles struct {
	// Enabled turns the captures on (`enabled`). Default
	// DefaultProfilesEnabled (true).
	Enabled bool
	// CPUThreshold is the share of GOMAXPROCS's CPU time above which the
	// process counts as busy (`cpu_threshold`, greater than 0 and at most
	// 1). Default DefaultProfilesCPUThreshold (0.9).
	CPUThreshold float64
	// Sustain is how long CPU use must stay above the threshold before a
	// capture (`sustain`, 1s to 1h). Default DefaultProfilesSustain (10s).
	Sustain time.Duration
	// OnShedding also captures when admission control starts refusing
	// requests (`on_shedding`). Default DefaultProfilesOnShedding (true).
	OnShedding bool
	// Interval is the least time between two captures (`interval`, 1s to
	// 24h). Default DefaultProfilesInterval (10m).
	Interval time.Duration
	// Duration is how long each CPU profile records (`duration`, 100ms to
	// 5m). Default DefaultProfilesDuration (10s).
	Duration time.Duration
	// Keep is how many captures are kept, the newest (`keep`, 1 to 1000).
	// Default DefaultProfilesKeep (10).
	Keep int
	// MaxBytes bounds the captures' files together, the oldest removed
	// first (`max_bytes`, 1MiB to 16GiB). Default DefaultProfilesMaxBytes
	// (64MiB).
	MaxBytes int64
}

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultLogLevel is Log.Level when omitted.
	DefaultLogLevel = "info"
	// DefaultLogAccess is Log.Access when omitted.
	DefaultLogAccess = true
	// DefaultMetricsAppLabels is Metrics.AppLabels when omitted.
	DefaultMetricsAppLabels = 50
	// DefaultMetricsEndpointLabels is Metrics.EndpointLabels when omitted.
	DefaultMetricsEndpointLabels = 50
)

// logLevels are the accepted values of Log.Level, lowest first.
var logLevels = []string{"debug", "info", "warn", "error"}

// Defaults of this file's fields, each the def of its table entry.
const (
	// The profiles block's defaults (Profiles).
	DefaultProfilesEnabled      = true
	DefaultProfilesCPUThreshold = 0.9
	DefaultProfilesSustain      = 10 * time.Second
	DefaultProfilesOnShedding   = true
	DefaultProfilesInterval     = 10 * time.Minute
	DefaultProfilesDuration     = 10 * time.Second
	DefaultProfilesKeep         = 10
	DefaultProfilesMaxBytes     = 64 << 20
)
