package config

import (
	"slices"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/grpcwire"
	"gopkg.in/yaml.v3"
)

// The retry block (`retry`, an upstream's or a route's) and its
// `backoff` and `budget`.

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	backoffBlock = engine.NewBlock(
		engine.Field{Name: "base", Kind: engine.KindDuration, Def: DefaultRetryBackoffBase, Doc: "backoff before the first retry; at most max",
			Bind: engine.At(func(b *Backoff) *time.Duration { return &b.Base })},
		engine.Field{Name: "max", Kind: engine.KindDuration, Def: DefaultRetryBackoffMax, Doc: "longest backoff",
			Bind: engine.At(func(b *Backoff) *time.Duration { return &b.Max })},
	)
	retryBudgetBlock = engine.NewBlock(
		engine.Field{Name: "ratio", Kind: engine.KindNumber, Flo: 0, Fhi: maxRetryBudgetRatio, Def: DefaultRetryBudgetRatio,
			Doc:  "retries allowed per request, on average",
			Bind: engine.At(func(b *RetryBudget) *float64 { return &b.Ratio })},
		engine.Field{Name: "min_per_second", Kind: engine.KindNumber, Flo: 0, Fhi: maxRetryMinPerSecond, Def: DefaultRetryBudgetMinPerSecond,
			Doc:  "retries allowed per second whatever the ratio",
			Bind: engine.At(func(b *RetryBudget) *float64 { return &b.MinPerSecond })},
	)
	retryBlock = engine.NewBlock(
		engine.Field{Name: "attempts", Kind: engine.KindInt, Lo: minRetryAttempts, Hi: maxRetryAttempts, Def: DefaultRetryAttempts,
			Doc:  "tries in all, the first included",
			Bind: engine.At(func(r *Retry) *int { return &r.Attempts })},
		engine.Field{Name: "on", Kind: engine.KindList, MinItems: 1, Item: &engine.Field{Kind: engine.KindEither, Either: []engine.Field{
			{Kind: engine.KindEnum, Enum: retryConditions}, {Kind: engine.KindInt, Lo: minRetryStatus, Hi: maxRetryStatus}}},
			Doc: `conditions retried: "connect_failure", "refused_stream", "reset_before_response", a gRPC status name ("unavailable", "resource_exhausted", ...: docs/grpc.md) or a status from 400 to 599`},
		engine.Field{Name: "per_try_timeout", Kind: engine.KindDuration, Def: nil,
			Doc:  "deadline of each try; none when omitted",
			Bind: engine.At(func(r *Retry) *time.Duration { return &r.PerTryTimeout })},
		engine.Field{Name: "backoff", Kind: engine.KindBlock, Sub: backoffBlock, Doc: "jittered exponential backoff between tries"},
		engine.Field{Name: "budget", Kind: engine.KindBlock, Sub: retryBudgetBlock, Doc: "cap on retries across the upstream (upstreams only)",
			Bind: engine.At(func(r *Retry) *RetryBudget { return &r.Budget })},
		engine.Field{Name: "replay_body_limit", Kind: engine.KindSize, Lo: 0, Hi: maxReplayBodyLimit, Def: DefaultRetryReplayBodyLimit,
			Doc:  "largest request body kept to replay on a retry",
			Bind: engine.At(func(r *Retry) *int64 { return &r.ReplayBodyLimit })},
	)
)

// retry reads a `retry` block: an upstream's, or a route's when forRoute.
// upstream is then the route's upstream as written ("" if not known yet),
// which the error for a misplaced `budget` names.
func (p *parser) retry(path string, n *yaml.Node, forRoute bool, upstream string) *Retry {
	r := defaultRetry(forRoute)
	if forRoute {
		// budget is reported here, even when null, rather than as an
		// unknown field: it is a known field in the wrong place.
		if k := firstKey(n, "budget"); k != nil {
			if !validName(upstream) {
				upstream = "NAME"
			}
			p.Add(k, engine.Key(path, "budget"), "budget is per upstream; set it under upstreams.%s.retry", upstream)
		}
	}
	f, ok := p.Block(path, n, retryBlock)
	if !ok {
		return r
	}
	if forRoute {
		delete(f, "budget") // reported above
	}
	// attempts, per_try_timeout, budget and replay_body_limit.
	p.Bind(f, n, path, retryBlock, r)
	if v := f["on"]; v != nil {
		if on, ok := p.retryOn(engine.Key(path, "on"), v, forRoute); ok {
			r.On = on
		}
	}
	if v := f["backoff"]; v != nil {
		p.backoff(&r.Backoff, engine.Key(path, "backoff"), v)
	}
	return r
}

// firstKey returns the key node of the first entry named name in mapping
// n, or nil.
func firstKey(n *yaml.Node, name string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.ShortTag() == "!!str" && k.Value == name {
			return k
		}
	}
	return nil
}

// retryOn reads `on`: a non-empty list of distinct condition names and
// status codes (YAML integers 400 to 599).
func (p *parser) retryOn(path string, n *yaml.Node, forRoute bool) (RetryOn, bool) {
	var on RetryOn
	items, ok := p.Sequence(path, n)
	if !ok {
		return on, false
	}
	if len(items) == 0 {
		if forRoute {
			p.Add(n, path, "must list at least one condition; set attempts: 1 to disable retries on this route")
		} else {
			p.Add(n, path, "must list at least one condition; omit retry to disable retries")
		}
		return on, false
	}
	firstCond := make(map[string]int, len(items))
	firstStatus := make(map[int]int, len(items))
	for i, item := range items {
		ip := engine.Index(path, i)
		if item.Kind == yaml.AliasNode {
			ok = false
			continue
		}
		tag := item.ShortTag()
		switch {
		case item.Kind == yaml.ScalarNode && tag == "!!int":
			var v int64
			if item.Decode(&v) != nil || v < minRetryStatus || v > maxRetryStatus {
				p.Add(item, ip, "must be a status code from %d to %d, got %s", minRetryStatus, maxRetryStatus, engine.Describe(item))
				ok = false
				continue
			}
			if j, dup := firstStatus[int(v)]; dup {
				p.Add(item, ip, "duplicate status %d (first at on[%d])", v, j)
				ok = false
				continue
			}
			firstStatus[int(v)] = i
			on.Statuses = append(on.Statuses, int(v))
		case item.Kind == yaml.ScalarNode && tag == "!!str":
			s := item.Value
			if !slices.Contains(retryConditions, s) {
				switch {
				case s != "" && strings.Trim(s, "0123456789") == "":
					p.Add(item, ip, "status codes must be unquoted numbers, got %s", engine.Quote(s))
				case slices.Contains(retryConditions, strings.ToLower(s)):
					p.Add(item, ip, "unknown condition %s (did you mean %s? condition names are lower case)", engine.Quote(s), engine.Quote(strings.ToLower(s)))
				case engine.Suggest(s, retryConditions) != "":
					p.Add(item, ip, "unknown condition %s%s", engine.Quote(s), engine.Suggest(s, retryConditions))
				default:
					p.Add(item, ip, "unknown condition %s; must be one of %s, a gRPC status name (%s) or a status code from %d to %d",
						engine.Quote(s), engine.QuotedList(retryConditions[:3]), strings.Join(grpcwire.Names(), ", "), minRetryStatus, maxRetryStatus)
				}
				ok = false
				continue
			}
			if j, dup := firstCond[s]; dup {
				p.Add(item, ip, "duplicate condition %s (first at on[%d])", engine.Quote(s), j)
				ok = false
				continue
			}
			firstCond[s] = i
			switch s {
			case condConnectFailure:
				on.ConnectFailure = true
			case condRefusedStream:
				on.RefusedStream = true
			case condResetBeforeResponse:
				on.ResetBeforeResponse = true
			default: // a gRPC status name (retryConditions)
				on.GRPC = append(on.GRPC, s)
			}
		default:
			p.Add(item, ip, "must be a condition such as %q or a status code from %d to %d, got %s",
				condConnectFailure, minRetryStatus, maxRetryStatus, engine.Describe(item))
			ok = false
		}
	}
	slices.Sort(on.Statuses)
	slices.SortFunc(on.GRPC, func(a, b string) int {
		ca, _ := grpcwire.CodeByName(a)
		cb, _ := grpcwire.CodeByName(b)
		return int(ca) - int(cb)
	})
	return on, ok
}

// backoff reads `backoff`; max may not be less than base, whichever of
// them the file sets.
func (p *parser) backoff(b *Backoff, path string, n *yaml.Node) {
	f, ok := p.Block(path, n, backoffBlock)
	if !ok {
		return
	}
	if p.Bind(f, n, path, backoffBlock, b) != nil || b.Max >= b.Base {
		return
	}
	switch {
	case f["max"] == nil:
		p.Add(f["base"], engine.Key(path, "base"), "must be at most max (%s, the default), got %s", b.Max, engine.Describe(f["base"]))
	case f["base"] == nil:
		p.Add(f["max"], engine.Key(path, "max"), "must be at least base (%s, the default), got %s", b.Base, engine.Describe(f["max"]))
	default:
		p.Add(f["max"], engine.Key(path, "max"), "must be at least base (%s), got %s", b.Base, engine.Describe(f["max"]))
	}
}

// Retry is a retry policy (`retry`), set per upstream and optionally
// replaced per route. Which requests may be retried at all (idempotent
// ones, bodies up to ReplayBodyLimit, within the budget and the route's
// Timeout) is the proxy's rule, described in docs/configuration.md.
type Retry struct {
	// Attempts is the total number of tries, the first included
	// (`attempts`, a whole number 1 to 10). Default DefaultRetryAttempts
	// (3). 1 means no retries.
	Attempts int
	// On is the set of outcomes that are retried (`on`, a non-empty list
	// of condition names and status codes). Default: connect_failure,
	// refused_stream, reset_before_response, 502, 503 and 504.
	On RetryOn
	// PerTryTimeout bounds one attempt, from the start of its connect to
	// the response headers (`per_try_timeout`, a duration greater than
	// 0). Default DefaultRetryPerTryTimeout (0), which means none: only
	// the upstream's Timeouts and the route's Timeout apply. An attempt
	// that hits it counts as status 504 for On.
	PerTryTimeout time.Duration
	// Backoff is the wait between attempts (`backoff`).
	Backoff Backoff
	// Budget caps the retries to the upstream (`budget`). Set only in an
	// upstream's Retry; always zero in a route's.
	Budget RetryBudget
	// ReplayBodyLimit is the largest request body, in bytes, that is
	// buffered so that it can be sent again (`replay_body_limit`, a size
	// from 0 to 16MiB). Default DefaultRetryReplayBodyLimit (64KiB). A
	// request with a larger body is not retried once any of it was sent;
	// 0 means only requests without a body are.
	ReplayBodyLimit int64
}

// RetryOn is the set of outcomes a Retry retries (`on`). In YAML it is one
// list mixing condition names and status codes, each at most once:
// [connect_failure, 503].
type RetryOn struct {
	// ConnectFailure retries when a connection to the endpoint could not
	// be established, so nothing of the request was sent
	// (`connect_failure`).
	ConnectFailure bool
	// RefusedStream retries an HTTP/2 stream the upstream refused
	// (REFUSED_STREAM) (`refused_stream`). levee does not speak HTTP/2 to
	// upstreams yet, so for now it never applies.
	RefusedStream bool
	// ResetBeforeResponse retries when the connection was reset or closed
	// after the request was sent but before any response header arrived
	// (`reset_before_response`).
	ResetBeforeResponse bool
	// GRPC are the gRPC statuses retried, by name (grpcwire.Names:
	// "unavailable", "resource_exhausted", ...), in code order, nil when
	// the list names none. Judged from the grpc-status of a trailers-only
	// answer; such a call is retried whatever its method (docs/grpc.md).
	GRPC []string
	// Statuses are the response status codes retried, sorted ascending,
	// without duplicates, each 400 to 599 (written as YAML integers, not
	// strings). nil when the list names none. A timeout levee itself
	// hits counts as 504.
	Statuses []int
}

// Backoff is the wait before each retry (`backoff`): it starts from Base,
// grows with each retry and never exceeds Max. Both are durations greater
// than 0, and Max is at least Base.
type Backoff struct {
	// Base is the starting wait (`base`). Default
	// DefaultRetryBackoffBase (25ms).
	Base time.Duration
	// Max caps the wait (`max`). Default DefaultRetryBackoffMax (250ms).
	Max time.Duration
}

// RetryBudget caps an upstream's retries (`budget`): over a sliding
// 10-second window, retries may not exceed Ratio × first attempts +
// MinPerSecond × 10. Both zero means no retries are ever allowed.
type RetryBudget struct {
	// Ratio is the share of requests that may be retried (`ratio`, a
	// number from 0 to 1). Default DefaultRetryBudgetRatio (0.2).
	Ratio float64
	// MinPerSecond is the retry allowance per second that holds however
	// little traffic there is (`min_per_second`, a number from 0 to
	// 1000000, fractions allowed). Default DefaultRetryBudgetMinPerSecond
	// (5).
	MinPerSecond float64
}

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultRetryAttempts is Retry.Attempts when omitted: the first try
	// and two retries.
	DefaultRetryAttempts = 3
	// DefaultRetryPerTryTimeout is Retry.PerTryTimeout when omitted: 0,
	// none.
	DefaultRetryPerTryTimeout time.Duration = 0
	// DefaultRetryBackoffBase is Backoff.Base when omitted.
	DefaultRetryBackoffBase = 25 * time.Millisecond
	// DefaultRetryBackoffMax is Backoff.Max when omitted.
	DefaultRetryBackoffMax = 250 * time.Millisecond
	// DefaultRetryBudgetRatio is RetryBudget.Ratio when omitted.
	DefaultRetryBudgetRatio = 0.2
	// DefaultRetryBudgetMinPerSecond is RetryBudget.MinPerSecond when
	// omitted.
	DefaultRetryBudgetMinPerSecond = 5.0
	// DefaultRetryReplayBodyLimit is Retry.ReplayBodyLimit when omitted:
	// 64KiB.
	DefaultRetryReplayBodyLimit int64 = 64 << 10
)

// DefaultRetryOn returns RetryOn when `on` is omitted: connect_failure,
// refused_stream, reset_before_response, 502, 503 and 504. Each call
// returns a new value.
func DefaultRetryOn() RetryOn {
	return RetryOn{
		ConnectFailure:      true,
		RefusedStream:       true,
		ResetBeforeResponse: true,
		Statuses:            []int{502, 503, 504},
	}
}

// Bounds of this file's fields, used by their table entries and readers.
const (
	minRetryAttempts     = 1
	maxRetryAttempts     = 10
	minRetryStatus       = 400
	maxRetryStatus       = 599
	maxReplayBodyLimit   = 16 << 20
	maxRetryBudgetRatio  = 1.0
	maxRetryMinPerSecond = 1e6
)

// Retry condition names, as written in `on`.
const (
	condConnectFailure      = "connect_failure"
	condRefusedStream       = "refused_stream"
	condResetBeforeResponse = "reset_before_response"
)

// retryConditions are the condition names `on` accepts besides status
// codes.
// The names of gRPC statuses (grpcwire.Names: "unavailable",
// "resource_exhausted", ...) are conditions too: an answer whose
// grpc-status is one of them is retried (RetryOn.GRPC).
var retryConditions = append([]string{condConnectFailure, condRefusedStream, condResetBeforeResponse}, grpcwire.Names()...)

// defaultRetry returns the Retry of a `retry` block that sets nothing. A
// route's Retry leaves Budget zero.
func defaultRetry(route bool) *Retry {
	r := engine.WithDefaults(retryBlock, &Retry{On: DefaultRetryOn(), PerTryTimeout: DefaultRetryPerTryTimeout})
	engine.WithDefaults(backoffBlock, &r.Backoff)
	if !route {
		r.Budget = defaultRetryBudget()
	}
	return r
}

func defaultRetryBudget() RetryBudget { return *engine.WithDefaults(retryBudgetBlock, &RetryBudget{}) }
