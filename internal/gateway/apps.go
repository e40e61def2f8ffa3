package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/proxy"
	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/statedb"
)

// This file wires the consumer-app store: opened under state_dir at
// Start, seeded from the file at Start and on every reload, closed at
// Shutdown, and served by the admin API. The request path reads only
// g.apps.Current() (an immutable snapshot), never the database.

// appsDBName is the app store's file under state_dir.
const appsDBName = "apps.db"

// seedTimeout bounds seeding the store at start or reload; each statement
// is also bounded by the store's own query timeout.
const seedTimeout = 30 * time.Second

// openApps opens the app store under cfg.StateDir (creating the
// directory) and seeds it from cfg.Apps.
func (g *Gateway) openApps(cfg *config.Config) (apps.Backend, error) {
	if err := os.MkdirAll(cfg.StateDir, 0o750); err != nil {
		return nil, fmt.Errorf("state_dir: %w", err)
	}
	if cfg.Cluster != nil && cfg.Cluster.Etcd != nil {
		return g.openSharedApps(cfg)
	}
	path := filepath.Join(cfg.StateDir, appsDBName)
	ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
	defer cancel()
	store, err := apps.Open(ctx, apps.Options{Config: statedb.Config{Path: path, Logger: g.logger}, OnChange: g.publishApps})
	if err != nil {
		return nil, err
	}
	g.publishApps(store.Current())
	g.seedApps(ctx, store, cfg)
	return store, nil
}

// seedApps applies the file's apps to the store and logs the outcome.
// Failures are per app (logged by the store) and never refuse the
// configuration: the stored state of that app keeps serving.
func (g *Gateway) seedApps(ctx context.Context, store apps.Backend, cfg *config.Config) {
	res, err := store.Seed(ctx, fileApps(cfg.Apps))
	if err != nil {
		g.logger.Error("apps: seeding from the file failed; the stored apps keep serving", "error", err)
		return
	}
	g.logger.Info("apps seeded from the file", append(res.LogArgs(), "apps", store.Current().Len())...)
}

// fileApps converts the file's apps to the store's model.
func fileApps(in []config.App) []apps.FileApp {
	out := make([]apps.FileApp, 0, len(in))
	for _, a := range in {
		fa := apps.FileApp{
			Spec: apps.Spec{
				ID:     a.ID,
				Name:   a.Name,
				Status: apps.Status(a.Status),
				Grants: slices.Clone(a.Grants),
				Limits: apps.Limits{
					Rate: a.Limits.Rate, Burst: a.Limits.Burst, Quota: quota(a.Limits.Quota),
					MaxConcurrency: a.Limits.MaxConcurrency,
				},
			},
			KeySHA256: slices.Clone(a.APIKeySHA256),
		}
		if len(a.RouteLimits) > 0 {
			fa.RouteLimits = make(map[string]apps.RouteLimit, len(a.RouteLimits))
			for r, l := range a.RouteLimits {
				fa.RouteLimits[r] = apps.RouteLimit{Rate: l.Rate, Burst: l.Burst, Quota: quota(l.Quota)}
			}
		}
		out = append(out, fa)
	}
	return out
}

func quota(q *config.Quota) *apps.Quota {
	if q == nil {
		return nil
	}
	return &apps.Quota{Requests: q.Requests, Rows: q.Rows, Bytes: q.Bytes, Per: apps.Duration(q.Per)}
}

// Apps returns the consumer-app store (after Start; nil before). Its
// Current snapshot is what the request path may read.
func (g *Gateway) Apps() apps.Backend {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.apps
}

// routeServes reports whether a route of that name serves now (the
// admin API's grant check, apps.GrantChecked).
func (g *Gateway) routeServes(name string) bool {
	g.mu.Lock()
	routes := g.cfg.Routes
	g.mu.Unlock()
	return slices.ContainsFunc(routes, func(r config.Route) bool { return r.Name == name })
}

// publishApps turns the store's snapshot into the request path's and
// swaps it in. The store calls it after every committed change, in commit
// order; appsMu keeps two swaps from interleaving, so each new snapshot
// carries its predecessor's per-app counters.
func (g *Gateway) publishApps(s *apps.Snapshot) {
	g.appsMu.Lock()
	defer g.appsMu.Unlock()
	g.handler.SwapApps(proxyApps(s, g.handler.Apps(), g.logger))
}

// proxyApps converts a store snapshot to the request path's model: O(apps),
// run once per change, never per request. Credentials are not converted:
// the request path reads the identity index the store built with the
// snapshot (apps.Snapshot.Identities), the one index of keys. A limit the store
// accepted but ratelimit refuses (it validates the same bounds, so this is
// a bug) is logged and the app is left out: its calls are refused rather
// than let through unlimited.
func proxyApps(s *apps.Snapshot, prev *proxy.Apps, logger *slog.Logger) *proxy.Apps {
	list := s.Apps()
	out := make([]*proxy.App, 0, len(list))
	for _, a := range list {
		pa := &proxy.App{ID: a.ID, Suspended: !a.Active(), MaxConcurrency: a.Limits.MaxConcurrency,
			Grants: make(map[string]bool, len(a.Grants))}
		for _, r := range a.Grants {
			pa.Grants[r] = true
		}
		var unreadable []string
		if pa.Passwords, unreadable = a.BasicPasswords(); len(unreadable) > 0 {
			// A bug, or a row changed behind the store's back.
			logger.Error("apps: a password digest is unreadable; it admits no one", "app", a.ID, "passwords", unreadable)
		}
		var err error
		if pa.Limit, err = appPolicy(a.Limits.Rate, a.Limits.Burst, a.Limits.Quota); err != nil {
			logger.Error("apps: an app's limits are invalid; its requests are refused", "app", a.ID, "error", err)
			continue
		}
		if len(a.RouteLimits) > 0 {
			pa.RouteLimits = make(map[string]ratelimit.Policy, len(a.RouteLimits))
			for r, l := range a.RouteLimits {
				if pa.RouteLimits[r], err = appPolicy(l.Rate, l.Burst, l.Quota); err != nil {
					break
				}
			}
			if err != nil {
				logger.Error("apps: an app's route limits are invalid; its requests are refused", "app", a.ID, "error", err)
				continue
			}
		}
		out = append(out, pa)
	}
	return proxy.NewApps(out, s.Identities(), prev)
}

// appPolicy builds a rate-limit policy from an app's limits (rate 0: no
// rate limit; quota nil: no quota; a quota of 0 requests, which apps
// refuses, is refused too).
func appPolicy(rate float64, burst int, q *apps.Quota) (ratelimit.Policy, error) {
	if q == nil {
		return ratelimit.NewPolicy(rate, burst, 0, 0)
	}
	if q.Requests == 0 && q.Rows == 0 && q.Bytes == 0 {
		_, err := ratelimit.NewQuota(0, time.Duration(q.Per))
		return ratelimit.Policy{}, err
	}
	p, err := ratelimit.NewPolicy(rate, burst, 0, 0)
	if err != nil {
		return p, err
	}
	p.Quota, err = ratelimit.NewUsageQuota(q.Requests, q.Rows, q.Bytes, time.Duration(q.Per))
	return p, err
}
