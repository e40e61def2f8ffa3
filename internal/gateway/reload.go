package gateway

import (
	"context"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/upstream"
)

// Reload loads the configuration again and, if it is valid, makes it serve
// every request that starts from now on. On error nothing changes: the
// previous configuration keeps serving, and the error lists every problem.
// Listener addresses and TLS on/off cannot change without a restart; such a
// change is refused. The access log and the tracer are rebuilt only when
// log.access or tracing changes (obsreload.go).
func (g *Gateway) Reload() error {
	// reloadMu, not mu, is held across the I/O (file, certificates,
	// snapshots, seeding): a rebuild waits for mu, never for a disk.
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	a0 := heapAllocated()
	cfg, err := g.load()
	collectParseGarbage(heapAllocated() - a0)
	if err == nil {
		err = g.checkPinned(cfg) // content rolled back as bad (rollback.go)
	}
	g.mu.Lock()
	prev := g.fileCfg
	g.mu.Unlock()
	if err = g.applyReload(cfg, err); err == nil {
		g.reloaded(time.Now(), cfg, prev)
	}
	return err
}

// parseGarbageCollect is how much a configuration's parse must have
// allocated for the reload to collect its garbage before building
// (collectParseGarbage): about a 2 MiB file's (5,000 routes and 10,000
// apps are 4 MiB, 60 MiB of parse garbage). Below it the pacer's own
// collections are cheaper than a forced one.
const parseGarbageCollect = 32 << 20

// collectParseGarbage runs a garbage collection after a parse that
// allocated at least parseGarbageCollect bytes (allocated). The parse's
// YAML node tree, token values and walker maps are garbage once the
// typed configuration is built; without a collection they stay beside
// the new table until the pacer's next cycle, so a reload's peak is the
// sum of the two instead of the larger (docs/performance.md, "Scale").
// The cost is one full collection, about 0.1 s of CPU at a 150 MiB live
// heap, for a large reload only; requests are not stopped (the mark runs
// beside them).
func collectParseGarbage(allocated uint64) {
	if allocated >= parseGarbageCollect {
		runtime.GC()
	}
}

// heapAllocated is the bytes allocated on the heap so far (cumulative,
// every goroutine's: requests served meanwhile count too, which only
// makes a collection likelier).
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// applyReload makes cfg (loaded with err) serve, as Reload does, and
// records the result. Called with reloadMu held: by Reload, and by the
// rollback's revert to the last good configuration.
func (g *Gateway) applyReload(cfg *config.Config, err error) error {
	if err == nil {
		err = g.checkReloadable(cfg)
	}
	if err == nil {
		err = g.certs.load(cfg)
	}
	var upTLS map[string]*upstream.ClientTLS
	if err == nil {
		upTLS, err = g.loadUpstreamTLS(cfg)
	}
	rdata, eff, err := g.reloadDataAPIs(cfg, err)
	if err == nil && len(cfg.DataSources) > 0 && g.cursorKey == nil {
		g.cursorKey, err = loadCursorKey(cfg.StateDir) // the first data routes: read under reloadMu, before mu
	}
	prevToken := g.token.Load()
	if err == nil {
		err = g.loadToken(cfg)
	}
	var obs *obsChange
	if err == nil {
		obs, err = g.prepareObservability(cfg)
	}
	var feeds map[string]*feed
	var fresh, retired []*feed
	if err == nil {
		feeds, fresh, retired, err = g.reconcileFeeds(cfg, g.feeds)
	}
	var store apps.Backend
	if err == nil {
		store, err = g.swapConfig(eff, cfg, feeds, fresh, upTLS)
	}
	if err != nil {
		obs.discard()
		g.token.Store(prevToken)
		now := time.Now()
		g.history.Add(now, g.self.Reloaded(err, now), err)
		g.logger.Error("reload refused; previous configuration keeps serving", "error", err.Error())
		return err
	}
	g.swapObservability(obs)
	// Retired feeds are stopped after g.mu is released: a feed applying an
	// update waits for g.mu to swap its upstream's Balance.
	for _, f := range retired {
		f.Stop()
	}
	if store != nil {
		g.syncPushes() // running: a new push upstream reads its shared push
	}
	if store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
		g.seedApps(ctx, store, cfg)
		cancel()
	}
	g.reseedDataAPIs(rdata, cfg)
	g.applyProfiles(cfg)
	now := time.Now()
	g.history.Add(now, g.self.Reloaded(nil, now), nil)
	g.logger.Info("configuration reloaded", "upstreams", len(cfg.Upstreams), "routes", len(cfg.Routes))
	return nil
}

// swapConfig builds cfg's table over feeds and, if that succeeds, makes
// them serve: it starts the fresh feeds (when the gateway runs), swaps the
// table and keeps cfg (effective) and file. It returns the app store to
// seed (nil before Start or after Shutdown). Called with g.reloadMu held;
// it holds g.mu.
func (g *Gateway) swapConfig(cfg, file *config.Config, feeds map[string]*feed, fresh []*feed, upTLS map[string]*upstream.ClientTLS) (apps.Backend, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev, prevTLS := g.feeds, g.upTLS
	g.feeds, g.upTLS = feeds, upTLS
	table, err := g.buildTable(cfg)
	if err != nil {
		g.feeds, g.upTLS = prev, prevTLS
		return nil, err
	}
	g.rb.noteFeeds(feeds)
	if g.started {
		for _, f := range fresh {
			f.Start()
		}
	}
	g.swapTable(table)
	g.cfg, g.fileCfg = cfg, file
	return g.apps, nil
}
