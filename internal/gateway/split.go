package gateway

import (
	"errors"
	"fmt"
	"slices"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/proxy"
)

// This file wires a route's split (config's route_split.go, proxy's
// split.go) and the admin API's weight changes.
//
// An admin change of a route's weights is kept in memory (Gateway.splits)
// with the file's split it was made over: every table built while the
// file still says that split for the route (a reload that leaves it
// alone, a data API change) keeps the admin weights; a reload that
// changes the route's split in the file drops them, and so does a
// restart (they are not written under state_dir).

// splitOverride is an admin API change of one route's weights: weights
// (parallel to base) replace the file's while the file's split is base.
type splitOverride struct {
	base    []config.SplitSide
	weights []int
}

// splitRoute gives rt its split: one side per rc.Split item, each a copy
// of rt to the side's upstream with that upstream's retry when the route
// has none. rt's own Upstream becomes a placeholder. Called by buildTable
// with g.mu held.
func (g *Gateway) splitRoute(cfg *config.Config, rc *config.Route, rt *proxy.Route, upstreams map[string]*proxy.Upstream) error {
	sides := make([]*proxy.Route, len(rc.Split))
	weights := make([]int, len(rc.Split))
	var bufferBody int64
	for i, s := range rc.Split {
		up, uc := upstreams[s.Upstream], cfg.Upstreams[s.Upstream]
		if up == nil || uc == nil {
			return fmt.Errorf("split[%d]: unknown upstream %q", i, s.Upstream)
		}
		side := *rt
		side.Upstream = up
		retry := rc.Retry
		if retry == nil {
			retry = uc.Retry
		}
		side.Retry, side.BufferBodyBytes = retryPolicy(retry), bufferBodyBytes(retry)
		bufferBody = max(bufferBody, side.BufferBodyBytes)
		sides[i], weights[i] = &side, s.Weight
	}
	if o, ok := g.splits[rc.Name]; ok && slices.Equal(o.base, rc.Split) {
		weights = o.weights
	}
	var sticky *proxy.HashOn
	if st := rc.SplitSticky; st != nil {
		sticky = &proxy.HashOn{Kind: "header", Name: st.Header}
		if st.Cookie != "" {
			sticky = &proxy.HashOn{Kind: "cookie", Name: st.Cookie}
		}
	}
	sp, err := proxy.NewSplit(sides, weights, sticky)
	if err != nil {
		return err
	}
	// The body is read before the side is known: the largest of the
	// sides' replay limits, so any side's retries can replay it.
	rt.Split, rt.Upstream, rt.BufferBodyBytes = sp, &proxy.Upstream{}, bufferBody
	return nil
}

// SetSplit changes route name's split weights (admin API, PUT
// /api/v1/routes/{name}/split): sides must name each of the route's
// upstreams once. It applies to the serving table at once and to every
// table built while the file's split for the route is unchanged.
// A change of the weights is a version of the automatic rollback
// (rollback_changes.go): watched, reverted and pinned when it hurt.
func (v operatorView) SetSplit(name string, sides []admin.SplitSideView) (*admin.SplitView, error) {
	sv, change, err := v.g.setSplit(name, sides, true)
	if err == nil && change != nil {
		v.g.splitChanged(name, change.upstreams, change.prev, change.weights)
	}
	return sv, err
}

// splitChange is what a weight change replaced, for the rollback.
type splitChange struct {
	upstreams     []string // the sides' upstreams, in the file's order
	prev, weights []int
}

// setSplit applies sides to route name; checked refuses weights pinned as
// bad (an admin change; the rollback's own revert is not checked).
func (g *Gateway) setSplit(name string, sides []admin.SplitSideView, checked bool) (*admin.SplitView, *splitChange, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sv, change, err := g.setSplitLocked(name, sides, checked)
	return sv, change, err
}

func (g *Gateway) setSplitLocked(name string, sides []admin.SplitSideView, checked bool) (*admin.SplitView, *splitChange, error) {
	var rc *config.Route
	for i := range g.cfg.Routes {
		if g.cfg.Routes[i].Name == name {
			rc = &g.cfg.Routes[i]
		}
	}
	switch {
	case rc == nil:
		return nil, nil, admin.ErrNoRoute
	case len(rc.Split) == 0:
		return nil, nil, admin.ErrNoSplit
	}
	weights := make([]int, len(rc.Split))
	given := make([]config.SplitSide, 0, len(sides))
	seen := map[string]bool{}
	for _, s := range sides {
		i := slices.IndexFunc(rc.Split, func(c config.SplitSide) bool { return c.Upstream == s.Upstream })
		if i < 0 {
			return nil, nil, fmt.Errorf("split: upstream %q is not a side of route %q", s.Upstream, name)
		}
		if seen[s.Upstream] {
			return nil, nil, fmt.Errorf("split: upstream %q is listed twice", s.Upstream)
		}
		seen[s.Upstream] = true
		weights[i] = s.Weight
		given = append(given, config.SplitSide{Upstream: s.Upstream, Weight: s.Weight})
	}
	if len(given) != len(rc.Split) {
		return nil, nil, fmt.Errorf("split: list every side of route %q (%d), got %d", name, len(rc.Split), len(given))
	}
	if problem := config.CheckSplitWeights(given); problem != "" {
		return nil, nil, errors.New("split: " + problem)
	}
	if checked {
		if err := g.checkSplitPinned(name, weights); err != nil {
			return nil, nil, err
		}
	}
	change := &splitChange{prev: slices.Clone(g.servingWeights(name)), weights: weights}
	for _, s := range rc.Split {
		change.upstreams = append(change.upstreams, s.Upstream)
	}
	for _, rt := range g.handler.Table().Routes() {
		if rt.Name == name && rt.Split != nil {
			if err := rt.Split.SetWeights(weights); err != nil {
				return nil, nil, err
			}
		}
	}
	// Keep one entry per route that still has the split it was made over
	// (bounded by the routes).
	for k, o := range g.splits {
		if !g.cfgHasSplit(k, o.base) {
			delete(g.splits, k)
		}
	}
	if g.splits == nil {
		g.splits = map[string]splitOverride{}
	}
	g.splits[name] = splitOverride{base: slices.Clone(rc.Split), weights: weights}
	return splitView(rc, weights), change, nil
}

// cfgHasSplit reports whether the serving configuration's route name has
// split base. g.mu held.
func (g *Gateway) cfgHasSplit(name string, base []config.SplitSide) bool {
	for i := range g.cfg.Routes {
		if rc := &g.cfg.Routes[i]; rc.Name == name {
			return slices.Equal(rc.Split, base)
		}
	}
	return false
}

// servingWeights returns route name's weights in the serving table (the
// admin API's, else the file's), parallel to its split; nil when none.
func (g *Gateway) servingWeights(name string) []int {
	for _, rt := range g.handler.Table().Routes() {
		if rt.Name == name && rt.Split != nil {
			return rt.Split.Weights()
		}
	}
	return nil
}

// splitView is a route's split as GET /api/v1/routes shows it, with
// weights (nil: the file's).
func splitView(rc *config.Route, weights []int) *admin.SplitView {
	if len(rc.Split) == 0 {
		return nil
	}
	sv := &admin.SplitView{Sides: make([]admin.SplitSideView, len(rc.Split))}
	for i, s := range rc.Split {
		w := s.Weight
		if len(weights) == len(rc.Split) {
			w = weights[i]
		}
		sv.Sides[i] = admin.SplitSideView{Upstream: s.Upstream, Weight: w}
	}
	if st := rc.SplitSticky; st != nil {
		sv.StickyHeader, sv.StickyCookie = st.Header, st.Cookie
	}
	return sv
}
