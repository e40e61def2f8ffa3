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
	logBlock = newBlock(
		field{name: "level", kind: kindEnum, enum: logLevels, def: DefaultLogLevel, doc: "lowest level logged",
			bind: at(func(l *Log) *string { return &l.Level })},
		field{name: "access", kind: kindEither, def: DefaultLogAccess, doc: "whether each request is logged: true, false, or the access log's settings (which turn it on)",
			either: []field{{kind: kindBool}, {kind: kindBlock, sub: accessLogBlock}}},
	)
	profilesBlock = newBlock(
		field{name: "enabled", kind: kindBool, def: DefaultProfilesEnabled, doc: "whether levee captures CPU profiles by itself",
			bind: at(func(p *Profiles) *bool { return &p.Enabled })},
		field{name: "cpu_threshold", kind: kindFraction, def: DefaultProfilesCPUThreshold, doc: "share of GOMAXPROCS's CPU above which the process is busy",
			bind: at(func(p *Profiles) *float64 { return &p.CPUThreshold })},
		field{name: "sustain", kind: kindDuration, def: DefaultProfilesSustain, doc: "how long CPU use stays above the threshold before a capture; 1s to 1h",
			check: checkDurationWithin(time.Second, time.Hour), bind: at(func(p *Profiles) *time.Duration { return &p.Sustain })},
		field{name: "on_shedding", kind: kindBool, def: DefaultProfilesOnShedding, doc: "also capture when admission starts refusing requests",
			bind: at(func(p *Profiles) *bool { return &p.OnShedding })},
		field{name: "interval", kind: kindDuration, def: DefaultProfilesInterval, doc: "least time between two captures; 1s to 24h",
			check: checkDurationWithin(time.Second, 24*time.Hour), bind: at(func(p *Profiles) *time.Duration { return &p.Interval })},
		field{name: "duration", kind: kindDuration, def: DefaultProfilesDuration, doc: "how long each CPU profile records; 100ms to 5m",
			check: checkDurationWithin(100*time.Millisecond, 5*time.Minute), bind: at(func(p *Profiles) *time.Duration { return &p.Duration })},
		field{name: "keep", kind: kindInt, lo: 1, hi: 1000, def: DefaultProfilesKeep, doc: "captures kept, the newest",
			bind: at(func(p *Profiles) *int { return &p.Keep })},
		field{name: "max_bytes", kind: kindSize, lo: 1 << 20, hi: 16 << 30, def: int64(DefaultProfilesMaxBytes), doc: "the captures' files together; the oldest go first",
			bind: at(func(p *Profiles) *int64 { return &p.MaxBytes })},
	)
	metricsBlock = newBlock(
		field{name: "app_labels", kind: kindInt, lo: 0, hi: maxMetricsAppLabels, def: DefaultMetricsAppLabels,
			doc:  "apps given their own metric label; the rest share one",
			bind: at(func(m *Metrics) *int { return &m.AppLabels })},
		field{name: "endpoint_labels", kind: kindInt, lo: 0, hi: maxMetricsAppLabels, def: DefaultMetricsEndpointLabels,
			doc:  "endpoints of one upstream given their own metric label; the rest share one",
			bind: at(func(m *Metrics) *int { return &m.EndpointLabels })},
	)
)

// log reads `log`: level, and access as true, false or a block.
func (p *parser) log(l *Log, n *yaml.Node) {
	f, ok := p.block("log", n, logBlock)
	if !ok {
		return
	}
	p.bind(f, n, "log", logBlock, l) // level
	v := f["access"]
	switch {
	case v == nil, v.Kind == yaml.AliasNode:
	case v.Kind == yaml.MappingNode:
		l.Access = true
		p.accessLog(&l.AccessLog, v)
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool":
		l.Access, _ = p.boolean("log.access", v)
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
