package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/dataapis"
	"github.com/levee-gw/levee/internal/proxy"
	"github.com/levee-gw/levee/internal/rollback"
)

// The automatic rollback (docs/rollback.md): every applied change (a file
// reload, a data-API publish, the start itself) is a numbered version in
// the rollback.Store under state_dir/rollback; a goroutine samples the
// node's health (the proxy's answers and own 502/503/504 refusals, the
// readiness) and hands it to the rollback.Watcher, and this file applies
// its verdicts: a change that hurt is reverted (the configuration to the
// last good file content, a data API to the version that served before,
// or offline) and pinned; one that survived its window is marked good.

// configSubject is the Subject of the configuration file's versions.
const configSubject = "config"

// rollbackState is the gateway's part of the automatic rollback. store is
// nil with `rollback: {enabled: false}`.
type rollbackState struct {
	store   *rollback.Store
	watch   *rollback.Watcher
	metrics *rollback.Metrics
	opts    config.Rollback
	// servingGood: the last good configuration serves instead of the file
	// (pinned, or a crash loop); why says since when and why.
	servingGood atomic.Bool
	why         atomic.Pointer[string]

	mu sync.Mutex
	// pending holds what a verdict on a watched version needs, by
	// version (bounded as the watcher's changes are: an entry leaves with
	// its verdict, or when the watcher judges it early).
	pending map[int]pendingChange
	// start: when the process started serving, and whether that start
	// has been marked survived.
	startedAt time.Time
	survived  bool

	stop, done chan struct{}
	// feeds are the discovery feeds that serve (g.feeds, stored at each
	// assignment): healthSample reads them without g.mu, which its
	// callers may hold.
	feeds atomic.Pointer[map[string]*feed]
}

// noteFeeds records the feeds now serving, which the registry watch reads.
func (rb *rollbackState) noteFeeds(feeds map[string]*feed) { rb.feeds.Store(&feeds) }

type pendingChange struct {
	revert  func() error
	content []byte // a configuration version's file content (marked good: saved)
}

// openRollback opens the rollback state of cfg's state_dir and records
// this start. It returns the configuration to start with: cfg, or the last
// good one when cfg's content is pinned or the starts before were a crash
// loop (logged loudly; the admin API and /readyz say so).
func openRollback(cfg *config.Config, logger *slog.Logger, now time.Time) (*rollbackState, *config.Config, error) {
	rb := &rollbackState{opts: cfg.Rollback, pending: map[int]pendingChange{}}
	if !cfg.Rollback.Enabled {
		return rb, cfg, nil
	}
	store, err := rollback.OpenStore(filepath.Join(cfg.StateDir, "rollback"), cfg.Rollback.Keep)
	if err != nil {
		return nil, nil, err
	}
	rb.store = store
	rb.watch = rollback.NewWatcher(rollback.Options{Window: cfg.Rollback.Window, MaxErrorRatio: cfg.Rollback.MaxErrorRatio, MinRequests: uint64(cfg.Rollback.MinRequests)})
	loop, err := store.BeginStart(now, cfg.Rollback.CrashStarts, cfg.Rollback.CrashWithin)
	if err != nil {
		return nil, nil, err
	}
	digest := rollback.Digest(cfg.Source())
	pin, pinned := store.Pinned(rollback.KindReload, configSubject, digest)
	if !pinned && !loop {
		return rb, cfg, nil
	}
	good := store.Good()
	if good == nil || rollback.Digest(good) == digest {
		if loop {
			logger.Error("rollback: crash loop detected, but there is no other last good configuration to start from; starting from the file",
				"crash_starts", cfg.Rollback.CrashStarts, "crash_within", cfg.Rollback.CrashWithin.String())
		} else {
			logger.Error("rollback: the configuration file is pinned as bad, but there is no last good configuration to start from; starting from the file", "version", pin.Version)
		}
		return rb, cfg, nil
	}
	goodCfg, err := config.Parse(good)
	if err != nil {
		logger.Error("rollback: the last good configuration no longer parses; starting from the file", "error", err.Error())
		return rb, cfg, nil
	}
	why := ""
	if pinned {
		why = fmt.Sprintf("the configuration file is version %d's content, rolled back as bad (%s)", pin.Version, pin.Reason)
	} else {
		why = fmt.Sprintf("crash loop: the last %d starts within %s each ended before serving for %s", cfg.Rollback.CrashStarts, cfg.Rollback.CrashWithin, cfg.Rollback.Window)
		n, err := store.Record(now, rollback.KindReload, configSubject, digest, rollback.StateBad)
		if err == nil {
			_ = store.Mark(n, rollback.StateBad, why)
			_, err = store.PinVersion(now, rollback.Change{Version: n, Kind: rollback.KindReload, Subject: configSubject, Digest: digest}, why)
		}
		if err != nil {
			return nil, nil, err
		}
		why = fmt.Sprintf("version %d (the configuration file) pinned: %s", n, why)
	}
	logger.Error("ROLLBACK: levee starts from its last good configuration, not the file; fix the file (or unpin it through the admin API) and reload",
		"why", why, "good_digest", rollback.Digest(good), "file_digest", digest)
	rb.servingGood.Store(true)
	rb.why.Store(&why)
	return rb, goodCfg, nil
}

// registerRollback declares the rollback series (always, so the catalogue
// is the same with rollback off).
func (g *Gateway) registerRollback() error {
	m, err := rollback.NewMetrics(g.registry)
	if err != nil {
		return err
	}
	g.rb.metrics = m
	m.SetServingGood(g.rb.servingGood.Load())
	return nil
}

// startRollback begins watching the start itself (its configuration a
// version unless it is the last good one) and starts the sampling
// goroutine. Called by Start, under g.mu.
func (g *Gateway) startRollback(now time.Time, file *config.Config) {
	rb := g.rb
	if rb.store == nil {
		return
	}
	rb.mu.Lock()
	rb.startedAt = now
	rb.mu.Unlock()
	if !rb.servingGood.Load() && rollback.Digest(file.Source()) != rb.store.View().GoodConfigDigest {
		g.watchConfig(now, file, nil, rollback.StateWatching)
	}
	rb.stop, rb.done = make(chan struct{}), make(chan struct{})
	tick := min(max(rb.opts.Window/10, 20*time.Millisecond), time.Second)
	go g.rollbackLoop(rb.stop, rb.done, tick)
}

// stopRollback stops the sampling goroutine and marks this start as
// ended cleanly (a drained stop is no crash).
func (g *Gateway) stopRollback() {
	rb := g.rb
	if rb.store == nil || rb.stop == nil {
		return
	}
	close(rb.stop)
	<-rb.done
	if err := rb.store.Survived(); err != nil {
		g.logger.Error("rollback: recording the stop", "error", err)
	}
}

func (g *Gateway) rollbackLoop(stop <-chan struct{}, done chan<- struct{}, tick time.Duration) {
	defer close(done)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			g.rollbackTick(now)
		}
	}
}

// healthSample is the node's health now, as the watcher reads it.
func (g *Gateway) healthSample() rollback.Sample {
	n, errs := g.metrics.HealthCounts()
	s := rollback.Sample{Requests: n, Errors: errs, Ready: g.ready.Load(), Waiting: g.waitingForEndpoints()}
	if h1 := g.h1.Load(); h1 != nil {
		s.Panics = h1.Panics()
	}
	return s
}

// waitingForEndpoints reports whether a discovered upstream has no
// endpoint set yet (its registry has not delivered since it started, and
// it has no static endpoints or snapshot), or has its first set but not
// yet in the table that serves (the swap follows the delivery): its 503s
// then are not a change's harm (rollback.Sample.Waiting). A set delivered
// empty is not waiting. At most one feed per upstream.
func (g *Gateway) waitingForEndpoints() bool {
	feeds := g.rb.feeds.Load()
	if feeds == nil {
		return false
	}
	var t *proxy.Table
	for name, f := range *feeds {
		cur, origin := f.Instances()
		if origin == "" {
			return true
		}
		if len(cur) == 0 {
			continue
		}
		if t == nil && g.handler != nil {
			t = g.handler.Table()
		}
		if t == nil {
			continue
		}
		if up := t.Upstream(name); up != nil {
			if b := up.Balance(); b == nil || len(b.Endpoints) == 0 {
				return true
			}
		}
	}
	return false
}

// rollbackTick judges the watched changes at now and applies the verdict.
func (g *Gateway) rollbackTick(now time.Time) {
	rb := g.rb
	v := rb.watch.Tick(now, g.healthSample())
	rb.mu.Lock()
	markStart := !rb.survived && now.Sub(rb.startedAt) >= rb.opts.Window
	if markStart {
		rb.survived = true
	}
	rb.mu.Unlock()
	if markStart {
		if err := rb.store.Survived(); err != nil {
			g.logger.Error("rollback: recording the start as survived", "error", err)
		}
	}
	for _, c := range v.Good {
		g.judgedGood(c)
	}
	if v.Bad.Version != 0 {
		g.revert(now, v.Bad, v.Why)
		// The 502s answered while the revert ran are the reverted change's.
		rb.watch.Rebase(g.healthSample())
	}
}

func (g *Gateway) takePending(n int) pendingChange {
	rb := g.rb
	rb.mu.Lock()
	defer rb.mu.Unlock()
	p := rb.pending[n]
	delete(rb.pending, n)
	return p
}

// judgedGood marks c good; a configuration's content becomes the last
// good one.
func (g *Gateway) judgedGood(c rollback.Change) {
	p := g.takePending(c.Version)
	if err := g.rb.store.Mark(c.Version, rollback.StateGood, ""); err != nil {
		g.logger.Error("rollback: marking a version good", "version", c.Version, "error", err)
	}
	if c.Kind == rollback.KindReload && p.content != nil {
		if err := g.rb.store.SaveGood(p.content); err != nil {
			g.logger.Error("rollback: saving the last good configuration", "version", c.Version, "error", err)
		}
	}
	g.logger.Info("rollback: version judged good", "version", c.Version, "kind", string(c.Kind), "subject", c.Subject)
}

// revert undoes c, which hurt (why), pins its content and counts it. A
// change that cannot be reverted (nothing to go back to, or the revert
// failed) is not pinned: pinning it would refuse the only configuration
// there is; it is marked and logged.
func (g *Gateway) revert(now time.Time, c rollback.Change, why string) {
	p := g.takePending(c.Version)
	rb := g.rb
	state := rollback.StateBad
	var err error
	if p.revert == nil {
		err = fmt.Errorf("nothing to revert to")
	} else {
		err = p.revert()
	}
	if err != nil {
		state = rollback.StateHurt
		why += "; not reverted: " + err.Error()
		g.logger.Error("rollback: a version hurt the node but could not be reverted; it keeps serving, not pinned", "version", c.Version, "kind", string(c.Kind), "subject", c.Subject, "why", why)
	} else {
		if _, err := rb.store.PinVersion(now, c, why); err != nil {
			g.logger.Error("rollback: pinning a bad version", "version", c.Version, "error", err)
		}
		rb.metrics.RolledBack(c.Kind)
		g.logger.Error("ROLLBACK: a change hurt the node and was reverted; its content is pinned", "version", c.Version, "kind", string(c.Kind), "subject", c.Subject, "why", why)
	}
	if err := rb.store.Mark(c.Version, state, why); err != nil {
		g.logger.Error("rollback: marking a bad version", "version", c.Version, "error", err)
	}
}

// watchConfig records file (applied at now) as a configuration version
// and watches it; its revert goes to the last good content, else to prev
// (nil: nothing to go back to but the last good content).
func (g *Gateway) watchConfig(now time.Time, file, prev *config.Config, state string) {
	rb := g.rb
	digest := rollback.Digest(file.Source())
	n, err := rb.store.Record(now, rollback.KindReload, configSubject, digest, state)
	if err != nil {
		g.logger.Error("rollback: recording a configuration version", "error", err)
		return
	}
	// The revert keeps the previous configuration's source, not the
	// configuration: a pending change held a whole parsed configuration
	// (about 9 MiB at 5,000 routes and 10,000 apps) until judged, and up
	// to maxPending are (docs/performance.md, "Scale"); the source is
	// held anyway (the previous change's content). One built in code (no
	// source) is kept as it is.
	prevCfg, prevSrc := prev, []byte(nil)
	if prev != nil && prev.Source() != nil {
		prevCfg, prevSrc = nil, prev.Source()
	}
	revert := func() error {
		target := prevCfg
		if good := rb.store.Good(); good != nil && rollback.Digest(good) != digest {
			if c, err := config.Parse(good); err == nil {
				target = c
			} else {
				g.logger.Error("rollback: the last good configuration no longer parses", "error", err.Error())
			}
		}
		if target == nil && prevSrc != nil {
			if c, err := config.Parse(prevSrc); err == nil {
				target = c
			} else {
				g.logger.Error("rollback: the previous configuration no longer parses", "error", err.Error())
			}
		}
		if target == nil {
			return fmt.Errorf("no last good configuration")
		}
		g.reloadMu.Lock()
		defer g.reloadMu.Unlock()
		if err := g.applyReload(target, nil); err != nil {
			return err
		}
		s := fmt.Sprintf("configuration version %d rolled back at %s", n, time.Now().UTC().Format(time.RFC3339))
		rb.why.Store(&s)
		rb.servingGood.Store(true)
		rb.metrics.SetServingGood(true)
		return nil
	}
	g.watchChange(now, rollback.Change{Version: n, Kind: rollback.KindReload, Subject: configSubject, Digest: digest},
		pendingChange{revert: revert, content: file.Source()})
}

// watchChange hands c to the watcher with what its verdict needs.
func (g *Gateway) watchChange(now time.Time, c rollback.Change, p pendingChange) {
	rb := g.rb
	rb.mu.Lock()
	rb.pending[c.Version] = p
	rb.mu.Unlock()
	if early := rb.watch.Begin(now, g.healthSample(), c); early.Version != 0 {
		g.logger.Warn("rollback: too many changes watched at once; the oldest is taken as good", "version", early.Version)
		g.judgedGood(early)
	}
}

// checkPinned refuses a configuration whose content is pinned (counted).
func (g *Gateway) checkPinned(cfg *config.Config) error {
	rb := g.rb
	if rb.store == nil {
		return nil
	}
	pin, ok := rb.store.Pinned(rollback.KindReload, configSubject, rollback.Digest(cfg.Source()))
	if !ok {
		return nil
	}
	rb.metrics.Refused(rollback.KindReload)
	return fmt.Errorf("the configuration file's content is version %d's, rolled back as bad at %s (%s); fix the file, or unpin version %d: %w",
		pin.Version, pin.At.Format(time.RFC3339), pin.Reason, pin.Version, admin.ErrPinned)
}

// reloaded records a reload that applied file in place of prev: a new
// version when the content changed. Called with reloadMu held.
func (g *Gateway) reloaded(now time.Time, file, prev *config.Config) {
	rb := g.rb
	if rb.store == nil {
		return
	}
	if rb.servingGood.Swap(false) {
		rb.metrics.SetServingGood(false)
		g.logger.Info("rollback: the configuration file serves again")
	}
	if prev != nil && rollback.Digest(prev.Source()) == rollback.Digest(file.Source()) {
		return
	}
	g.watchConfig(now, file, prev, rollback.StateWatching)
}

// checkDataAPIPinned refuses to serve a data-API definition pinned as bad.
func (g *Gateway) checkDataAPIPinned(name string, version int, def []byte) error {
	rb := g.rb
	if rb.store == nil {
		return nil
	}
	pin, ok := rb.store.Pinned(rollback.KindDataAPI, name, rollback.Digest(def))
	if !ok {
		return nil
	}
	rb.metrics.Refused(rollback.KindDataAPI)
	return fmt.Errorf("version %d of data API %s has the definition rolled back as bad at %s (%s); unpin rollback version %d first: %w",
		version, name, pin.At.Format(time.RFC3339), pin.Reason, pin.Version, admin.ErrPinned)
}

// dataAPIPublished watches a publish: its revert publishes previous again
// (0: takes the API offline). Called under reloadMu (the writer's lock).
func (g *Gateway) dataAPIPublished(store dataapis.Backend, name string, version int, def []byte, previous int) {
	rb := g.rb
	if rb.store == nil {
		return
	}
	now := time.Now()
	digest := rollback.Digest(def)
	n, err := rb.store.Record(now, rollback.KindDataAPI, name, digest, rollback.StateWatching)
	if err != nil {
		g.logger.Error("rollback: recording a data-API version", "error", err)
		return
	}
	revert := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
		defer cancel()
		w := g.dataAPIWriter(store)
		w.Published = nil
		var err error
		if previous > 0 {
			_, err = w.Rollback(ctx, name, previous)
		} else {
			_, err = w.Offline(ctx, name)
		}
		return err
	}
	g.watchChange(now, rollback.Change{Version: n, Kind: rollback.KindDataAPI, Subject: name, Digest: digest}, pendingChange{revert: revert})
}

// rollbackView is the admin API's RollbackStore.
type rollbackView struct{ g *Gateway }

func (v rollbackView) Rollbacks() any {
	rb := v.g.rb
	out := map[string]any{"enabled": rb.store != nil, "serving_good": rb.servingGood.Load()}
	if w := rb.why.Load(); w != nil && rb.servingGood.Load() {
		out["why"] = *w
	}
	if rb.store != nil {
		view := rb.store.View()
		out["versions"], out["pins"], out["starts"], out["good_config_digest"] = view.Versions, view.Pins, view.Starts, view.GoodConfigDigest
		out["window"] = rb.opts.Window.String()
	}
	return out
}

func (v rollbackView) Unpin(n int) (any, error) {
	rb := v.g.rb
	if rb.store == nil {
		return nil, admin.ErrNotPinned
	}
	pin, err := rb.store.Unpin(n)
	if err == rollback.ErrNoPin {
		return nil, admin.ErrNotPinned
	}
	if err == nil {
		v.g.logger.Warn("rollback: an operator unpinned a version", "version", n, "kind", string(pin.Kind), "subject", pin.Subject)
	}
	return pin, err
}

// rollbackNote is /readyz's note while the last good configuration serves
// instead of the file ("" otherwise).
func (g *Gateway) rollbackNote() string {
	if !g.rb.servingGood.Load() {
		return ""
	}
	why := ""
	if w := g.rb.why.Load(); w != nil {
		why = ": " + *w
	}
	return "running a rolled-back configuration (the last good one, not the file)" + why
}
