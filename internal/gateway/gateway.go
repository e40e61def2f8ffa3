// Package gateway is levee's composition root. It turns a validated
// config.Config into the typed options of the packages below it, builds the
// routing snapshot and swaps it atomically on reload, and owns the lifecycle
// of every listener and goroutine: New builds without side effects, Start
// listens, Shutdown drains. Nothing imports gateway except cmd/levee.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/acme"
	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/clusterlimit"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/dataapi"
	"github.com/levee-gw/levee/internal/datacache"
	"github.com/levee-gw/levee/internal/discovery"
	"github.com/levee-gw/levee/internal/fwdauth"
	"github.com/levee-gw/levee/internal/h1server"
	"github.com/levee-gw/levee/internal/health"
	"github.com/levee-gw/levee/internal/jwtauth"
	"github.com/levee-gw/levee/internal/memguard"
	"github.com/levee-gw/levee/internal/netlimit"
	"github.com/levee-gw/levee/internal/profiles"
	"github.com/levee-gw/levee/internal/proxy"
	"github.com/levee-gw/levee/internal/statedb"
	"github.com/levee-gw/levee/internal/telemetry"
	"github.com/levee-gw/levee/internal/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Gateway.
type Options struct {
	// Load returns the configuration; it is called once by New and again on
	// every reload. Required.
	Load func() (*config.Config, error)
	// LogOutput receives the structured log and the access log
	// (default os.Stderr).
	LogOutput io.Writer
	// Version is levee's version for levee_build_info (empty: "dev").
	Version string
	// LockStateDir makes New take an exclusive lock on
	// <state_dir>/levee.lock (statedb.LockDir), held until Shutdown or the
	// process's end, and refuse a state_dir another process holds.
	// `levee run` sets it; in-process tests leave it off, since some run
	// several gateways on one default state_dir.
	LockStateDir bool
}

// Gateway is one running levee: the data listener, the admin listener and
// the snapshot they serve. Safe for concurrent use.
type Gateway struct {
	load      func() (*config.Config, error)
	logger    *slog.Logger
	registry  *prometheus.Registry
	obsReload obsState // rebuilds the access log and the tracer on reload (obsreload.go)
	// The handler holds the access log and the tracer (nil: off); they
	// run from Start to Shutdown.
	metrics *proxy.Metrics
	handler *proxy.Handler
	self    *telemetry.SelfMetrics // build info, reloads and the last one's result
	history admin.ReloadHistory    // the last loads, for GET /api/v1/reloads
	// discoveryMetrics are shared by every feed.
	discoveryMetrics *discovery.Metrics
	// h2Metrics count the HTTP/2 upstreams' guarded connections (upstream_h2.go).
	h2Metrics *upstream.H2Metrics
	jwtKeys   jwtKeySets      // JWT issuers' key sets, kept across reloads (jwt.go)
	fwdAuth   fwdAuthCheckers // forward-auth routes' checkers, kept across reloads (fwdauth.go)
	// memory sheds work under memory pressure; nil with memory: off (or
	// no limit found). memoryFrom says its limit and where it came from.
	memory     *memguard.Guard
	memoryFrom string
	// What every data route shares (data.go). cursorKey is set under
	// reloadMu (at New, or at the reload that brings the first data route)
	// and read by buildTable, which runs under reloadMu too.
	dataMetrics *dataapi.Metrics
	dataCache   *datacache.Cache
	cursorKey   []byte
	// appsMu serialises publishing app snapshots to the handler (apps.go).
	// It is taken under reloadMu (a seed at reload), under mu (the seed at
	// Start) or alone (an admin API write); nothing is locked under it.
	appsMu sync.Mutex
	// health decides each endpoint's effective weight; its goroutines run
	// from Start to Shutdown.
	health *health.Manager
	// cluster shares consumer limits through Redis (cluster.go); nil without.
	// etcd is cluster.etcd's app store and membership (cluster_etcd.go).
	cluster *clusterlimit.Limiter
	etcd    etcdState
	// rb is the automatic rollback (rollback.go).
	rb *rollbackState
	// stateLock is the lock on state_dir (nil unless Options.LockStateDir).
	stateLock *statedb.DirLock
	// profiler takes CPU profiles by itself (profiles.go), counted in
	// profileMetrics.
	profiler       profiles.Runner
	profileMetrics *profiles.Metrics
	// endpointPager pages the admin API's endpoint reads in address
	// order (health.Pager).
	endpointPager health.Pager

	// reloadMu serialises reloads (and Shutdown's closing of the app store
	// against a reload's seed), held across their I/O; taken before mu.
	// cfg and feeds change under both: either is enough to read them.
	reloadMu sync.Mutex
	// mu guards the fields below it; it covers building and swapping a
	// table, never file or network I/O.
	mu sync.Mutex
	// cfg serves now: fileCfg (the file as loaded last) with the published data APIs (dataapis.go).
	cfg, fileCfg *config.Config
	pools        *pools
	// cert is the primary listener's TLS; certs every TLS listener's
	// (listeners.go), the primary's being &cert.
	cert  h1server.Certificate
	certs listenerCerts
	// acme orders the certificates of the listener with tls.acme (nil:
	// none); built by New, its renewals run from the first handshake.
	acme *acme.Manager
	// upTLS holds each TLS upstream's loaded files (upstream_tls.go), set
	// under reloadMu and mu.
	upTLS map[string]*upstream.ClientTLS
	// feeds holds the discovery feed of each upstream that has one.
	feeds map[string]*feed
	// splits holds the admin API's split weights, by route (split.go).
	splits map[string]splitOverride
	// apps is the consumer-app store, open from Start to Shutdown.
	apps     apps.Backend
	dataAPIs            // the data-API store, open from Start to Shutdown (dataapis.go)
	fleet    fleetState // with cluster.etcd: what this node serves of the shared data APIs (cluster_dataapis.go)
	// token holds the admin API's bearer tokens with their scopes (none:
	// the API is open) and admin.hosts, replaced on reload (adminauth.go).
	token atomic.Pointer[adminAuth]

	adminSrv *http.Server
	// h1 serves the primary data listener, clear text or TLS (it
	// handshakes); its fallback net/http server serves only the
	// connections it hands off (HTTP/2, upgrades, chunked bodies, ...).
	// Set by Start.
	h1              atomic.Pointer[h1server.Server]
	listeners       []*dataListener // every data listener, the primary (h1, dataLn) included; set by Start under mu
	dataLn, adminLn net.Listener
	started         bool
	ready           atomic.Bool
	serveErr        chan error
	sweepStop       chan struct{} // closed by Shutdown to stop the idle sweep
	sweepDone       chan struct{} // closed when the idle sweep returns

	// dataLimit wraps the data listener (always: it counts the open and
	// accepted connections for metrics, and caps them when configured).
	// Set by Start.
	dataLimit atomic.Pointer[netlimit.Listener]
}

// New validates what it is given and builds the gateway without listening
// or starting goroutines.
func New(o Options) (_ *Gateway, err error) {
	if o.Load == nil {
		return nil, errors.New("gateway: Options.Load is required")
	}
	cfg, err := o.Load()
	if err != nil {
		return nil, err
	}
	out := o.LogOutput
	if out == nil {
		out = os.Stderr
	}
	logger, err := telemetry.NewLogger(out, cfg.Log.Level)
	if err != nil {
		return nil, err
	}
	var lock *statedb.DirLock
	if o.LockStateDir { // before anything under state_dir is read or written
		if lock, err = statedb.LockDir(cfg.StateDir); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				lock.Release()
			}
		}()
	}
	rb, cfg, err := openRollback(cfg, logger, time.Now()) // may start from the last good configuration
	if err != nil {
		return nil, err
	}
	g := &Gateway{
		rb:       rb,
		load:     o.Load,
		logger:   logger,
		registry: telemetry.NewRegistry(),
		cfg:      cfg,
		fileCfg:  cfg,
		pools:    newPools(),
		feeds:    map[string]*feed{},
		serveErr: make(chan error, 2),
	}
	g.stateLock = lock
	now := time.Now()
	if g.self, err = telemetry.NewSelfMetrics(g.registry, o.Version, now); err != nil {
		return nil, err
	}
	g.history.Add(now, "start", nil)
	if g.metrics, err = proxy.NewMetrics(g.registry); err != nil {
		return nil, err
	}
	if g.discoveryMetrics, err = discovery.NewMetrics(g.registry); err != nil {
		return nil, err
	}
	if err = g.registerRollback(); err != nil {
		return nil, err
	}
	if g.h2Metrics, err = upstream.NewH2Metrics(g.registry); err != nil {
		return nil, err
	}
	if g.profileMetrics, err = profiles.NewMetrics(g.registry); err != nil {
		return nil, err
	}
	if err := g.initData(cfg); err != nil {
		return nil, err
	}
	g.health = health.New(health.Options{Logger: logger, OnChange: g.onHealthChange})
	if g.feeds, _, _, err = g.reconcileFeeds(cfg, nil); err != nil {
		return nil, err
	}
	g.rb.noteFeeds(g.feeds)
	if err := g.obsReload.init(out, g.registry); err != nil {
		return nil, err
	}
	accessLog, err := newAccessLog(cfg.Log, g.obsReload.out, logger, g.obsReload.dropped)
	if err != nil {
		return nil, fmt.Errorf("log.access.output: %w", err)
	}
	if g.certs, err = g.newListenerCerts(cfg); err != nil {
		return nil, err
	}
	acmeMetrics, err := acme.NewMetrics(g.registry)
	if err != nil {
		return nil, err
	}
	if g.acme, err = newACME(cfg, acmeMetrics, logger); err != nil {
		return nil, err
	}
	if err := g.loadToken(cfg); err != nil {
		return nil, err
	}
	if g.upTLS, err = g.loadUpstreamTLS(cfg); err != nil {
		return nil, err
	}
	if g.memory, g.memoryFrom, err = memoryGuard(cfg.Memory, memguard.DefaultEnv()); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	table, err := g.buildTable(cfg)
	if err != nil {
		return nil, err
	}
	if g.cluster, err = g.newClusterLimiter(cfg); err != nil {
		return nil, err
	}
	tracer, err := newTracer(cfg.Tracing, g.obsReload.tracing, logger)
	if err != nil {
		return nil, err
	}
	g.handler, err = proxy.NewHandler(table, proxy.Options{
		Shared:         g.sharedLimits(),
		Metrics:        g.metrics,
		AccessLog:      accessLog,
		Logger:         logger,
		MaxHeaderBytes: int(cfg.Server.MaxHeaderBytes),
		Memory:         g.memory,

		UnderscoresInHeaders: underscoreMode(cfg.Server.UnderscoresInHeaders),
		Tracer:               tracer,
		TrustedProxies:       trustedProxies(cfg),
	})
	if err == nil {
		err = g.registerCollectors(cfg.Metrics.EndpointLabels)
	}
	if err == nil {
		err = g.registry.Register(g.handler.AppCollector(cfg.Metrics.AppLabels))
	}
	if err == nil {
		err = g.registry.Register(g.handler.ConsumerStateCollector())
	}
	if err == nil {
		err = g.registry.Register(jwtauth.Collector(g.jwtKeys.each))
	}
	if err == nil {
		err = g.registry.Register(fwdauth.Collector(g.eachForwardAuth))
	}
	if err != nil {
		g.closeCluster()
		return nil, err
	}
	return g, nil
}

// Registry returns the gateway's metrics registry.
func (g *Gateway) Registry() *prometheus.Registry { return g.registry }

// Start opens the listeners and serves them on their own goroutines; it
// returns once all listen. A partial start is undone: every step that can
// fail comes before any goroutine starts, each released in reverse order.
func (g *Gateway) Start() (err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started {
		return errors.New("gateway: already started")
	}
	cfg := g.cfg
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	store, err := g.openApps(cfg)
	if err != nil {
		return err
	}
	undo = append(undo, func() {
		if cerr := store.Close(); cerr != nil {
			g.logger.Error("closing the app store after a failed start", "error", cerr)
		}
	})
	dstore, eff, table, dataProblems, err := g.startDataAPIs(cfg)
	if err != nil {
		return err
	}
	undo = append(undo, func() { g.closeDataAPIs(dstore, " after a failed start") })
	lns, err := listenAll(cfg)
	if err != nil {
		return err
	}
	undo = append(undo, func() {
		for _, ln := range lns {
			ln.Close()
		}
	})
	adminLn, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return fmt.Errorf("admin.listen on %s: %w", cfg.Admin.Listen, err)
	}
	undo = append(undo, func() { adminLn.Close() })
	adminHandler, err := admin.NewHandler(admin.Options{
		Gateway: adminView{g}, Gatherer: g.registry,
		Apps: apps.GrantChecked{Backend: store, Route: g.routeServes}, Tokens: g.adminTokens, Docs: openAPIView{g}, Profiles: profileStoreView{g},
		OpenReads: g.adminOpenReads, Hosts: g.adminHosts,
		Operator: operatorView{g: g, store: store},
		DataAPIs: g.dataAPIWriter(dstore),
		Reloads:  g.history.List, Cluster: g.clusterView,
		Rollbacks: rollbackView{g},
	})
	if err != nil {
		return err
	}
	set, primary := cfg.ListenerSet(), cfg.PrimaryListener()
	listeners := make([]*dataListener, len(set))
	var h1 *h1server.Server
	var dataLn net.Listener
	for i, l := range set {
		srv, err := g.newListenerServer(cfg, l)
		if err != nil {
			return err
		}
		listeners[i] = &dataListener{cfg: l, h1: srv, ln: lns[i]}
		if l.Name == primary.Name {
			h1, dataLn = srv, lns[i]
		}
	}
	if err := g.acme.Start(); err != nil { // nil-safe; Close in shutdownListeners
		return err
	}
	undo = append(undo, g.acme.Close)
	// Nothing below fails: from here on, goroutines start.
	g.apps = store
	g.dataAPIs.store, g.cfg = dstore, eff
	g.swapTable(table)
	g.noteDataAPIs(dataProblems)
	for _, dl := range listeners {
		dl.limit = g.limitListener(dl.cfg, dl.ln)
		dl.ln = dl.limit
		if dl.cfg.Name == primary.Name {
			g.dataLimit.Store(dl.limit)
			dataLn = dl.limit
		}
	}
	g.listeners = listeners
	g.dataLn, g.adminLn = dataLn, adminLn
	g.adminSrv = &http.Server{
		Handler:           adminHandler,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	g.startObservability()
	g.h1.Store(h1)
	for _, dl := range listeners {
		go g.serve(dl.h1.Serve, dl.ln)
		if len(listeners) > 1 {
			g.logger.Info("data listener", "name", dl.cfg.Name, "addr", dl.ln.Addr().String(), "tls", dl.cfg.TLS != nil, "redirect_https", dl.cfg.RedirectHTTPS != nil)
		}
	}
	go g.serve(g.adminSrv.Serve, adminLn)
	g.sweepStop, g.sweepDone = make(chan struct{}), make(chan struct{})
	go upstream.Sweep(g.sweepStop, g.sweepDone, func(now time.Time) time.Duration {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.pools.sweepIdle(now)
	})
	for _, f := range g.feeds {
		f.Start()
	}
	if g.memory != nil {
		g.memory.Start()
	}
	g.health.Start()
	g.startCluster(cfg, adminLn)
	g.startProfiles(cfg)
	g.started = true
	g.ready.Store(true)
	g.startRollback(time.Now(), g.fileCfg)
	g.logger.Info("levee listening", "data", dataLn.Addr().String(), "admin", adminLn.Addr().String(), "tls", primary.TLS != nil)
	g.logger.Info("memory guard", "on", g.memory != nil, "limit", g.memoryFrom)
	g.logAdminToken()
	return nil
}

// newH1Server is h1server.New; a test replaces it to make Start fail at
// its last fallible step.
var newH1Server = h1server.New

// serve runs a listener's Serve (net/http's or h1server's); a listener
// that stops unexpectedly makes the gateway unready and is reported.
func (g *Gateway) serve(serve func(net.Listener) error, ln net.Listener) {
	if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		g.ready.Store(false)
		g.logger.Error("listener stopped", "addr", ln.Addr().String(), "error", err)
		select { // Wait takes the first; any other is logged above
		case g.serveErr <- err:
		default:
		}
	}
}

// newDataServer builds the client-facing net/http server: the fallback of
// h1server for the connections it hands off (HTTP/2 over TLS or h2c,
// upgrades, chunked bodies, ...), with the downstream timeouts that stop
// slowloris clients. It never handshakes: h1server does and hands it
// HTTP/2 connections as completed *tls.Conns, which its TLSNextProto["h2"]
// serves (net/http sets that up: HTTP/2 on, no TLSConfig).
func (g *Gateway) newDataServer(cfg *config.Config, tls bool, handler http.Handler) *http.Server {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if tls {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		// The handler answers header_too_large (431, JSON) above the
		// configured limit; the server's own cut-off sits at twice that, so
		// only absurd requests get a 431 from the server itself (JSON from
		// h1server, plain text from net/http after a handoff).
		MaxHeaderBytes: int(2 * cfg.Server.MaxHeaderBytes),
		Protocols:      protocols,
		// RFC 9113's 16 KiB initial frame size, not 1 MiB (docs/http2.md).
		HTTP2:    &http.HTTP2Config{MaxConcurrentStreams: cfg.Server.HTTP2MaxConcurrentStreams, MaxReadFrameSize: 1 << 14},
		ErrorLog: slog.NewLogLogger(g.logger.Handler(), slog.LevelDebug),
	}
	return srv
}

// Addr returns the data listener's address (after Start).
func (g *Gateway) Addr() net.Addr { return g.dataLn.Addr() }

// AdminAddr returns the admin listener's address (after Start).
func (g *Gateway) AdminAddr() net.Addr { return g.adminLn.Addr() }

// Errors delivers an error when a listener stops unexpectedly.
func (g *Gateway) Errors() <-chan error { return g.serveErr }

// Ready reports whether the gateway serves traffic.
func (g *Gateway) Ready() (bool, string) {
	if !g.ready.Load() {
		return false, "not_serving"
	}
	return true, ""
}

// Shutdown drains: the data listener closes at once (new connections are
// refused), requests in flight finish until ctx ends, then what remains is
// closed. The admin listener stops last.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	started := g.started
	g.started = false
	listeners := g.listeners
	g.mu.Unlock()
	if !started {
		g.obsReload.retiring.Wait() // what a reload before Start retired
		g.stateLock.Release()
		return nil
	}
	g.stopRollback() // before readiness drops: a drain is no verdict on a change
	g.ready.Store(false)
	g.logger.Info("draining", "data", g.dataLn.Addr().String())
	err := g.shutdownListeners(ctx, listeners)
	if err != nil {
		g.logger.Warn("drain deadline passed; closing remaining connections", "error", err)
	}
	g.handler.CloseUpgrades()
	g.handler.CloseMirrors() // before the pools close under them
	// Not under g.mu: the health loop may be waiting for it to swap a Balance.
	g.health.Stop()
	g.profiler.Stop()
	close(g.sweepStop)
	<-g.sweepDone
	g.etcd.pushes.Stop() // no shared push applies to a stopped feed
	g.mu.Lock()
	feeds := g.feeds
	g.mu.Unlock()
	for _, f := range feeds {
		f.Stop()
	}
	if g.memory != nil {
		g.memory.Stop()
	}
	g.mu.Lock()
	g.pools.closeAll()
	g.mu.Unlock()
	g.closeCluster()
	adminCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if aerr := g.adminSrv.Shutdown(adminCtx); aerr != nil {
		_ = g.adminSrv.Close()
	}
	g.stopObservability() // after the drain: the last requests' lines and spans go out too
	// Under reloadMu: a reload seeding the store finishes first.
	g.reloadMu.Lock()
	g.mu.Lock()
	store, dstore := g.apps, g.dataAPIs.store
	g.apps, g.dataAPIs.store = nil, nil
	g.mu.Unlock()
	g.reloadMu.Unlock()
	g.closeDataAPIs(dstore, "") // first: the shared one (cluster.etcd) uses the app store's etcd client
	if store != nil {
		if cerr := store.Close(); cerr != nil {
			g.logger.Error("closing the app store", "error", cerr)
		}
	}
	g.stateLock.Release() // after the stores under it are closed
	g.logger.Info("stopped")
	return err
}

// Run starts the gateway and then Waits.
func (g *Gateway) Run(ctx context.Context) error {
	if err := g.Start(); err != nil {
		return err
	}
	return g.Wait(ctx)
}

// Wait serves (after Start) until ctx is done or a listener fails, then
// drains within the configured shutdown timeout.
func (g *Gateway) Wait(ctx context.Context) error {
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-g.serveErr:
	}
	g.mu.Lock()
	timeout := g.cfg.Server.ShutdownTimeout
	g.mu.Unlock()
	drainCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := g.Shutdown(drainCtx); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}
