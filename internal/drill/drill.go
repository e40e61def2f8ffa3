// Package drill replays the seed outages against a running levee, safely:
// "levee drill". It talks to levee only through the admin API
// (internal/adminclient) and plain HTTP to the data listener. Every drill
// runs its own synthetic backends on loopback, pushes them as the endpoints
// of the drill upstream the operator declared once (docs/drills.md), creates
// throwaway apps with ids that cannot collide, drives traffic bounded by a
// rate cap and a duration cap, and removes what it made afterwards, also
// when its context is cancelled (SIGINT), within CleanupTimeout.
package drill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/adminclient"
)

// Bounds of the production cost (docs/drills.md).
const (
	// DefaultRate and MaxRate cap the requests per second a drill sends to
	// the data listener, all its clients together. MinRate is what the
	// drills need: overload offers at least 2.5x its backend's 40/s.
	DefaultRate = 200
	MinRate     = 100
	MaxRate     = 1000
	// DefaultDuration and MaxDuration cap one drill's traffic.
	DefaultDuration = 10 * time.Second
	MaxDuration     = 60 * time.Second
	// CleanupTimeout bounds the removal of what a drill made, run on a
	// fresh context so an interrupt cannot skip it.
	CleanupTimeout = 10 * time.Second
	// maxInflight bounds the drill's requests in flight.
	maxInflight = 64
	// requestTimeout bounds one drill request.
	requestTimeout = 5 * time.Second
)

// Options says where levee is and what a drill may cost.
type Options struct {
	Admin    *adminclient.Client
	Data     string // the data listener, "http://127.0.0.1:8080"
	Upstream string // the drill upstream (discovery: {push: true}); "levee-drill"
	Route    string // the drill route's name, granted to the drill's apps; "levee-drill"
	Prefix   string // the drill route's path prefix; "/_levee_drill/"
	// The registry drill's upstream (discovery: {file: PATH}, a file the
	// drill may write), its route and the route's prefix:
	// "levee-drill-registry", "levee-drill-registry",
	// "/_levee_drill_registry/".
	RegistryUpstream string
	RegistryRoute    string
	RegistryPrefix   string
	Rate             int           // requests per second, at most MaxRate
	Duration         time.Duration // traffic per drill, at most MaxDuration
	// Log, when set, receives progress lines.
	Log func(format string, args ...any)
}

// Figure is one measured number.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
}

// Result is what one drill found.
type Result struct {
	Name    string   `json:"name"`
	Held    bool     `json:"held"`
	Figures []Figure `json:"figures"`
	// Failed names each defence that did not hold, with the figures.
	Failed []string `json:"failed,omitempty"`
	// Error is set when the drill could not run (levee unreachable, the
	// drill upstream missing); Held is then false.
	Error string `json:"error,omitempty"`
	// Cleanup lists what could not be removed, if anything.
	Cleanup []string `json:"cleanup_errors,omitempty"`
}

func (r *Result) fig(name string, v float64, unit string) {
	r.Figures = append(r.Figures, Figure{name, v, unit})
}

func (r *Result) check(ok bool, format string, args ...any) {
	if !ok {
		r.Failed = append(r.Failed, fmt.Sprintf(format, args...))
	}
}

// A drill is one scenario.
type drill struct {
	name, about string
	// registry: the drill runs on the registry upstream (file-fed), not
	// the push-fed drill upstream.
	registry bool
	run      func(ctx context.Context, e *env, r *Result) error
}

var drills = []drill{
	{name: "zero-weight", about: `registry records with weights "0", "abc", "NaN" and 1e309 pushed beside good ones: the bad ones quarantined, "0" drained, the others served, every request answered, CPU per request unchanged`, run: zeroWeight},
	{name: "retry-storm", about: "one app at 10x its rate limit: 429 with Retry-After; another app's success ratio and p99 unchanged", run: retryStorm},
	{name: "overload", about: "an upstream at capacity (8 requests at once, 200 ms each) offered 5x that: fast refusals with Retry-After, goodput kept, served requests' p99 bounded", run: overload},
	{name: "dying-endpoint", about: "one of two backends dies mid-run: zero client failures (retries)", run: dyingEndpoint},
	{name: "registry-down", about: "the registry file levee reads is removed, filled with garbage and emptied mid-run: every request served from the last good set, each failure counted as a refused update and shown in the admin API", registry: true, run: registryDown},
}

// List returns the drills' names and what each shows, in run order.
func List() [][2]string {
	out := make([][2]string, len(drills))
	for i, d := range drills {
		out[i] = [2]string{d.name, d.about}
	}
	return out
}

// Known reports whether name is a drill.
func Known(name string) bool {
	for _, d := range drills {
		if d.name == name {
			return true
		}
	}
	return false
}

// Check fills defaults and refuses out-of-bounds options.
func (o *Options) Check() error {
	if o.Admin == nil {
		return errors.New("no admin client")
	}
	if o.Data == "" {
		o.Data = "http://127.0.0.1:8080"
	}
	if !strings.Contains(o.Data, "://") {
		o.Data = "http://" + o.Data
	}
	if u, err := url.Parse(o.Data); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("-data %q: want http://host:port", o.Data)
	}
	o.Data = strings.TrimSuffix(o.Data, "/")
	if o.Upstream == "" {
		o.Upstream = "levee-drill"
	}
	if o.Route == "" {
		o.Route = "levee-drill"
	}
	if o.Prefix == "" {
		o.Prefix = "/_levee_drill/"
	}
	if !strings.HasPrefix(o.Prefix, "/") {
		return fmt.Errorf("-prefix %q: must begin with /", o.Prefix)
	}
	if !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if o.RegistryUpstream == "" {
		o.RegistryUpstream = "levee-drill-registry"
	}
	if o.RegistryRoute == "" {
		o.RegistryRoute = "levee-drill-registry"
	}
	if o.RegistryPrefix == "" {
		o.RegistryPrefix = "/_levee_drill_registry/"
	}
	if !strings.HasPrefix(o.RegistryPrefix, "/") {
		return fmt.Errorf("-registry-prefix %q: must begin with /", o.RegistryPrefix)
	}
	if !strings.HasSuffix(o.RegistryPrefix, "/") {
		o.RegistryPrefix += "/"
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Rate < MinRate || o.Rate > MaxRate {
		return fmt.Errorf("-rate %d: want %d to %d requests per second", o.Rate, MinRate, MaxRate)
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Duration < 2*time.Second || o.Duration > MaxDuration {
		return fmt.Errorf("-duration %s: want 2s to %s", o.Duration, MaxDuration)
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return nil
}

// Run runs the named drills in order (all of them when names is empty).
// An unknown name is an error before anything runs. Each drill cleans up
// before the next starts; a cancelled ctx stops the run after cleanup.
func Run(ctx context.Context, o Options, names []string) ([]Result, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		for _, d := range drills {
			names = append(names, d.name)
		}
	}
	var todo []drill
	for _, n := range names {
		found := false
		for _, d := range drills {
			if d.name == n {
				todo, found = append(todo, d), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown drill %q (levee drill list)", n)
		}
	}
	var out []Result
	for _, d := range todo {
		if ctx.Err() != nil {
			out = append(out, Result{Name: d.name, Error: "interrupted before it started"})
			continue
		}
		o.Log("drill %s: running (at most %s of traffic, %d requests/s)", d.name, o.Duration, o.Rate)
		r := Result{Name: d.name, Figures: []Figure{}}
		e := newEnv(o, d.name)
		err := e.prepare(ctx, d.registry)
		if err == nil {
			err = d.run(ctx, e, &r)
		}
		r.Cleanup = e.cleanup()
		if err != nil {
			r.Error = err.Error()
		} else if ctx.Err() != nil {
			r.Error = "interrupted"
		}
		r.Held = r.Error == "" && len(r.Failed) == 0 && len(r.Cleanup) == 0
		o.Log("drill %s: held=%v", d.name, r.Held)
		out = append(out, r)
	}
	return out, nil
}

// runID makes the drill's names unique per run: 6 random hex digits.
func runID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// upstreamState is the part of GET /api/v1/upstreams/{name} a drill reads.
type upstreamState struct {
	Discovery *struct {
		Source      string `json:"source"`
		ServingFrom string `json:"serving_from"`
		LastError   string `json:"last_error"`
		Held        *struct {
			Instances int `json:"instances"`
		} `json:"held"`
		QuarantinedTotal int `json:"quarantined_total"`
		Quarantined      []struct {
			Key    string `json:"key"`
			Reason string `json:"reason"`
		} `json:"quarantined"`
	} `json:"discovery"`
	Endpoints []struct {
		Address string `json:"address"`
		State   string `json:"state"`
	} `json:"endpoints"`
	EndpointsTotal int `json:"endpoints_total"`
}

func (e *env) upstream(ctx context.Context) (*upstreamState, error) {
	return e.upstreamNamed(ctx, e.o.Upstream)
}

func (e *env) upstreamNamed(ctx context.Context, name string) (*upstreamState, error) {
	raw, err := e.o.Admin.Do(ctx, "GET", "/api/v1/upstreams/"+url.PathEscape(name), nil)
	if err != nil {
		return nil, err
	}
	var u upstreamState
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, fmt.Errorf("GET upstream %s: %w", name, err)
	}
	return &u, nil
}

// pushResult is the admin API's answer to a push.
type pushResult struct {
	Result   string `json:"result"`
	Rejected []struct {
		Key    string `json:"key"`
		Reason string `json:"reason"`
	} `json:"rejected"`
}

// push sets the drill upstream's endpoints to body (a JSON array) and
// confirms the update when the delta guard holds it (the drill's own
// upstream: nothing else is served from it).
func (e *env) push(ctx context.Context, body string) (*pushResult, error) {
	path := "/api/v1/upstreams/" + url.PathEscape(e.o.Upstream)
	raw, err := e.o.Admin.Do(ctx, "PUT", path+"/endpoints", []byte(body))
	if err != nil {
		return nil, fmt.Errorf("pushing the drill endpoints: %w", err)
	}
	var p pushResult
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("push answer: %w", err)
	}
	if p.Result == "held" {
		if _, err := e.o.Admin.Do(ctx, "POST", path+"/confirm", nil); err != nil {
			return nil, fmt.Errorf("confirming the drill endpoints: %w", err)
		}
		p.Result = "applied"
	}
	return &p, nil
}

// metric sums the samples of name whose labels contain every one of
// labels ("upstream=\"x\"") on the admin /metrics page.
func (e *env) metric(ctx context.Context, name string, labels ...string) (float64, error) {
	raw, err := e.o.Admin.Do(ctx, "GET", "/metrics", nil)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		var v float64
		if _, err := fmt.Sscan(f[len(f)-1], &v); err == nil {
			sum += v
		}
	}
	return sum, nil
}

func sortedKeys(m map[string]int) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}
