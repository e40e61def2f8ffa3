package gateway

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/discovery"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/prometheus/client_golang/prometheus"
)

// feed is one upstream's dynamic endpoint set: fed by a registry source (or
// by admin pushes), filtered by the discovery firewall and the delta
// guard, persisted as a snapshot under state_dir, and read by the gateway
// whenever it builds a routing table.
//
// Where its set comes from, in order: the last good registry update; at
// start, the snapshot on disk; failing that, the upstream's static
// endpoints from the configuration.
type feed struct {
	upstream string
	cfg      config.Discovery // what this feed was built from, to tell whether a reload changes it
	static   []discovery.Instance
	limits   discovery.Limits
	guard    *discovery.Guard
	source   discovery.Source // nil for push
	stateDir string
	metrics  *discoveryMetrics
	logger   *slog.Logger
	dedupe   *discovery.Deduper
	applied  func() // asks the gateway to rebuild its table; called without f.mu held

	mu struct {
		sync.Mutex
		current  []discovery.Instance
		origin   string // "registry", "push", "snapshot", "config" or "" (none yet)
		rejected []discovery.Rejection
		lastErr  string
		updated  time.Time
	}
	cancel context.CancelFunc
	done   chan struct{}
}

// discoveryMetrics are the discovery firewall's series.
type discoveryMetrics struct {
	updates  *prometheus.CounterVec // upstream, result
	rejected *prometheus.CounterVec // upstream, reason
}

func newDiscoveryMetrics(reg prometheus.Registerer) (*discoveryMetrics, error) {
	m := &discoveryMetrics{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_discovery_updates_total",
			Help: "Registry updates by result: applied, held (by the delta guard), or refused (whole: unreadable, malformed, too large, or every instance rejected; the last good set keeps serving).",
		}, []string{"upstream", "result"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_discovery_rejected_total",
			Help: "Registry instances quarantined, by stable reason.",
		}, []string{"upstream", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.updates, m.rejected} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// newFeed builds (without starting) the feed of upstream name.
func (g *Gateway) newFeed(name string, uc *config.Upstream, stateDir string) (*feed, error) {
	d := uc.Discovery
	f := &feed{
		upstream: name,
		cfg:      *d,
		limits:   discovery.Limits{MaxWeight: d.MaxWeight},
		stateDir: stateDir,
		metrics:  g.discoveryMetrics,
		logger:   g.logger.With("upstream", name),
		dedupe:   discovery.NewDeduper(discovery.DefaultDedupeCapacity),
		applied:  func() { g.rebuild("a discovery update") },
	}
	for _, ec := range uc.Endpoints {
		f.static = append(f.static, discovery.Instance{Address: ec.Address, Weight: ec.Weight * endpoint.WeightScale, Zone: ec.Zone})
	}
	var err error
	if f.guard, err = discovery.NewGuard(discovery.GuardOptions{MaxDropFraction: d.MaxDropFraction, ConfirmAfter: d.ConfirmAfter}); err != nil {
		return nil, fmt.Errorf("upstreams.%s.discovery: %w", name, err)
	}
	switch {
	case d.File != "":
		f.source, err = discovery.NewFileSource(d.File, discovery.FileOptions{Limits: f.limits})
	case d.Etcd != nil:
		f.source, err = discovery.NewEtcdSource(discovery.EtcdOptions{Endpoints: d.Etcd.Endpoints, Prefix: d.Etcd.Prefix, DialTimeout: d.Etcd.DialTimeout, Limits: f.limits})
	}
	if err != nil {
		return nil, fmt.Errorf("upstreams.%s.discovery: %w", name, err)
	}
	// The last good set survives restarts: start from it when there is one.
	if snap, at, err := discovery.ReadSnapshot(stateDir, name, f.limits); err == nil {
		f.mu.current, f.mu.origin, f.mu.updated = snap, "snapshot", at
	} else if !errors.Is(err, fs.ErrNotExist) {
		f.logger.Warn("discovery snapshot unreadable; not used", "error", err)
	}
	if f.mu.origin == "" && len(f.static) > 0 {
		f.mu.current, f.mu.origin = f.static, "config"
	}
	return f, nil
}

// start runs the feed's source (and the guard's confirm_after timer) until
// stop.
func (f *feed) start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	var wg sync.WaitGroup
	if f.source != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.source.Run(ctx, f.handle); err != nil {
				f.logger.Error("discovery source stopped", "error", err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.releaseHeldLoop(ctx)
	}()
	go func() {
		wg.Wait()
		close(f.done)
	}()
}

// stop ends the feed's goroutines and waits for them.
func (f *feed) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	<-f.done
}

// releaseHeldLoop re-offers a held update once a second, so that one the
// registry keeps sending unchanged (or sends once and never again) is
// applied when it has persisted for confirm_after.
func (f *feed) releaseHeldLoop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if h, ok := f.guard.Held(); ok {
				f.offer(discovery.Update{Instances: h.Instances}, now, "registry", false)
			}
		}
	}
}

// handle takes one source event.
func (f *feed) handle(ev discovery.Event) {
	if ev.Err != nil {
		f.countRejections(ev.Update.Rejected)
		f.metrics.updates.WithLabelValues(f.upstream, "refused").Inc()
		f.mu.Lock()
		first := f.mu.lastErr != ev.Err.Error()
		f.mu.lastErr = ev.Err.Error()
		f.mu.Unlock()
		if first {
			f.logger.Warn("registry update refused whole; the last good set keeps serving", "source", ev.Source, "error", ev.Err)
		}
		return
	}
	f.offer(ev.Update, time.Now(), "registry", true)
}

// offer passes an update through the delta guard and applies it if the
// guard lets it. count is false when re-offering a held update (already
// counted).
func (f *feed) offer(u discovery.Update, now time.Time, origin string, count bool) discovery.Decision {
	if count {
		f.countRejections(u.Rejected)
	}
	f.mu.Lock()
	d := f.guard.Offer(f.mu.current, u.Instances, now)
	if d.Action == discovery.Hold {
		if count {
			f.metrics.updates.WithLabelValues(f.upstream, "held").Inc()
			f.logger.Warn("registry update held by the delta guard", "drop_fraction", d.DropFraction, "held_for", d.HeldFor)
		}
		f.mu.Unlock()
		return d
	}
	f.applyLocked(d.Instances, u.Rejected, origin, now)
	f.mu.Unlock()
	f.metrics.updates.WithLabelValues(f.upstream, "applied").Inc()
	f.applied()
	return d
}

// confirm applies the held update on an operator's word.
func (f *feed) confirm(now time.Time) (discovery.Decision, bool) {
	d, ok := f.guard.Confirm(now)
	if !ok {
		return d, false
	}
	f.mu.Lock()
	f.applyLocked(d.Instances, f.mu.rejected, "registry", now)
	f.mu.Unlock()
	f.metrics.updates.WithLabelValues(f.upstream, "applied").Inc()
	f.logger.Info("held registry update confirmed by an operator", "drop_fraction", d.DropFraction)
	f.applied()
	return d, true
}

func (f *feed) applyLocked(list []discovery.Instance, rejected []discovery.Rejection, origin string, now time.Time) {
	f.mu.current, f.mu.rejected, f.mu.origin, f.mu.updated, f.mu.lastErr = list, rejected, origin, now, ""
	if err := discovery.WriteSnapshot(f.stateDir, f.upstream, list); err != nil {
		f.logger.Error("writing the discovery snapshot failed; the update is served but would not survive a restart", "error", err)
	}
}

// countRejections counts every quarantined instance and logs each distinct
// problem once.
func (f *feed) countRejections(rs []discovery.Rejection) {
	for _, r := range rs {
		f.metrics.rejected.WithLabelValues(f.upstream, string(r.Reason)).Inc()
		if f.dedupe.First(discovery.Problem{Upstream: f.upstream, Address: r.Key, Reason: r.Reason, Raw: r.Raw}) {
			f.logger.Warn("registry instance quarantined", "key", r.Key, "reason", r.Reason, "raw", r.Raw, "detail", r.Message)
		}
	}
}

// endpoints returns the feed's current set for a routing table.
func (f *feed) instances() ([]discovery.Instance, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.current, f.mu.origin
}

// sameConfig reports whether a reload leaves this feed's source alone.
func (f *feed) sameConfig(uc *config.Upstream) bool {
	return uc.Discovery != nil && reflect.DeepEqual(f.cfg, *uc.Discovery)
}

// reconcileFeeds returns the feeds cfg needs: the current feed of an
// upstream whose discovery settings did not change is kept (its source
// keeps running); others are built fresh (not started). retired are the
// current feeds no longer used; the caller stops them after releasing g.mu.
// Called with g.mu held (or before Start).
func (g *Gateway) reconcileFeeds(cfg *config.Config, current map[string]*feed) (next map[string]*feed, fresh, retired []*feed, err error) {
	next = map[string]*feed{}
	for _, name := range cfg.UpstreamOrder {
		uc := cfg.Upstreams[name]
		if uc.Discovery == nil {
			continue
		}
		if f, ok := current[name]; ok && f.sameConfig(uc) {
			next[name] = f
			continue
		}
		f, ferr := g.newFeed(name, uc, cfg.StateDir)
		if ferr != nil {
			return nil, nil, nil, ferr
		}
		next[name] = f
		fresh = append(fresh, f)
	}
	for name, f := range current {
		if next[name] != f {
			retired = append(retired, f)
		}
	}
	return next, fresh, retired, nil
}

// rebuild rebuilds the routing table after a feed applied an update or
// an endpoint's health changed (why says which), so new requests use the
// new endpoint set at once. Pickers whose inputs did not change are
// reused.
func (g *Gateway) rebuild(why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	table, err := g.buildTable(g.cfg)
	if err != nil {
		g.logger.Error("rebuilding the routing table after "+why+" failed; the previous one keeps serving", "error", err)
		return
	}
	g.handler.Swap(table)
}

// sourceName names where the feed's instances come from.
func (f *feed) sourceName() string {
	switch {
	case f.cfg.File != "":
		return "file:" + f.cfg.File
	case f.cfg.Etcd != nil:
		return "etcd:" + f.cfg.Etcd.Prefix
	}
	return "push"
}

// connected reports whether the feed's registry was reachable at the last
// attempt (always true for sources that cannot tell).
func (f *feed) connected() bool {
	if c, ok := f.source.(interface{ Connected() bool }); ok {
		return c.Connected()
	}
	return true
}

// view is the feed's state for the admin API.
func (f *feed) view() *admin.DiscoveryView {
	f.mu.Lock()
	v := &admin.DiscoveryView{
		Source: f.sourceName(), ServingFrom: f.mu.origin, Updated: f.mu.updated, LastError: f.mu.lastErr,
		Quarantined: make([]admin.QuarantineView, 0, len(f.mu.rejected)),
	}
	for _, r := range f.mu.rejected {
		v.Quarantined = append(v.Quarantined, admin.QuarantineView{Key: r.Key, Reason: string(r.Reason), Field: r.Field, Raw: r.Raw, Message: r.Message})
	}
	f.mu.Unlock()
	if h, ok := f.guard.Held(); ok {
		v.Held = &admin.HeldView{Since: h.Since, DropFraction: h.DropFraction, Instances: len(h.Instances),
			ConfirmWith: "POST /api/v1/upstreams/" + f.upstream + "/confirm"}
	}
	return v
}

// push offers an endpoint list sent to the admin API.
func (f *feed) push(body []byte) (int, any) {
	u, err := discovery.ParseList(body, f.limits)
	if err != nil {
		f.countRejections(u.Rejected)
		code := "refused"
		var pe *discovery.PayloadError
		if errors.As(err, &pe) && pe.Code != "" {
			code = pe.Code
		}
		f.metrics.updates.WithLabelValues(f.upstream, "refused").Inc()
		return http.StatusUnprocessableEntity, map[string]any{
			"error": err.Error(), "reason": code, "rejected": rejectionViews(u.Rejected),
			"result": "refused",
		}
	}
	d := f.offer(u, time.Now(), "push", true)
	status, result := http.StatusOK, "applied"
	if d.Action == discovery.Hold {
		status, result = http.StatusAccepted, "held"
	}
	return status, map[string]any{"result": result, "drop_fraction": d.DropFraction, "instances": len(u.Instances), "rejected": rejectionViews(u.Rejected)}
}

func rejectionViews(rs []discovery.Rejection) []admin.QuarantineView {
	out := make([]admin.QuarantineView, 0, len(rs))
	for _, r := range rs {
		out = append(out, admin.QuarantineView{Key: r.Key, Reason: string(r.Reason), Field: r.Field, Raw: r.Raw, Message: r.Message})
	}
	return out
}
