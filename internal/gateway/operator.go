package gateway

import (
	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/config"
)

// operatorView is the gateway as admin.Operator: GET /api/v1/config and
// GET /api/v1/routes, read from the serving configuration and the app
// store's current snapshot (never its database).
type operatorView struct {
	g     *Gateway
	store apps.Backend
}

// serving returns the configuration serving now.
func (v operatorView) serving() *config.Config {
	v.g.mu.Lock()
	defer v.g.mu.Unlock()
	return v.g.cfg
}

func (v operatorView) EffectiveConfig() ([]byte, error) { return config.Effective(v.serving()) }

// Routes describes each route in the file's order. Work: O(routes ×
// apps) over the snapshot, each app's grants a binary search.
func (v operatorView) Routes() []admin.RouteView {
	cfg := v.serving()
	var all []*apps.App
	if v.store != nil {
		all = v.store.Current().Apps() // id order
	}
	out := make([]admin.RouteView, 0, len(cfg.Routes))
	for i := range cfg.Routes {
		rc := &cfg.Routes[i]
		rv := admin.RouteView{
			Name:  rc.Name,
			Match: matchView(&rc.Match), Rewrite: rewriteView(rc.Rewrite),
			Kind: "upstream", Upstream: rc.Upstream, Auth: rc.Auth,
			GrantedAppIDs: []string{},
			Limits:        admin.RouteLimitsView{Priority: rc.Priority, Concurrency: admin.ConcurrencyOf(0, false)},
		}
		if m := rc.Mirror; m != nil { // mirror.go
			rv.Mirror = &admin.MirrorView{Upstream: m.Upstream, Percent: m.Percent, MaxInFlight: m.MaxInFlight, Timeout: m.Timeout.String()}
		}
		if rc.Timeout > 0 {
			rv.Limits.Timeout = rc.Timeout.String()
		}
		if a := rc.AnonymousLimits; a != nil {
			rv.Limits.AnonymousRate, rv.Limits.AnonymousBurst = a.Rate, a.Burst
		}
		var limits *config.Limits
		retry := rc.Retry
		if d := rc.Data; d != nil {
			rv.Kind, rv.DataSource, rv.Limits.MaxRows = "data", d.Source, d.MaxRows
			if src := cfg.DataSources[d.Source]; src != nil {
				limits = src.Limits
			}
		} else {
			body := rc.MaxBodyBytes
			rv.Limits.MaxBodyBytes = &body
			if uc := cfg.Upstreams[rc.Upstream]; uc != nil {
				limits = uc.Limits
				if retry == nil {
					retry = uc.Retry
				}
			}
		}
		if sv := splitView(rc, v.g.servingWeights(rc.Name)); sv != nil {
			rv.Kind, rv.Split = "split", sv
			if uc := cfg.Upstreams[rc.Split[0].Upstream]; uc != nil { // the first side's, as for a plain route to it
				limits = uc.Limits
				if retry == nil {
					retry = uc.Retry
				}
			}
		}
		switch { // a route that answers itself (steps.go)
		case rc.Redirect != nil:
			rv.Kind = "redirect"
		case rc.Respond != nil:
			rv.Kind = "respond"
		}
		if retry != nil {
			rv.Limits.RetryAttempts = retry.Attempts
		}
		if limits != nil {
			rv.Limits.Concurrency = admin.ConcurrencyOf(limits.MaxConcurrency, limits.Adaptive)
			rv.Limits.MaxQueue = limits.MaxQueue
		}
		if rc.Auth != config.AuthNone && rc.Auth != config.AuthForward { // forward auth names no app
			rv.GrantedApps, rv.GrantedAppIDs, rv.GrantedAppIDsTruncated = apps.GrantedTo(all, rc.Name, admin.MaxRouteAppIDs)
		}
		out = append(out, rv)
	}
	return out
}
