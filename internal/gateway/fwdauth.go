package gateway

// Forward auth (routes with auth: forward): one fwdauth.Checker per
// route, kept across reloads while the route's forward_auth is the same
// (so its cache and counts survive a reload that changes something else),
// made anew when it changes.

import (
	"fmt"
	"slices"
	"sync"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/fwdauth"
	"github.com/levee-gw/levee/internal/proxy"
)

// fwdAuthCheckers are the checkers by route name with the configuration
// they were made for. Bounded by the routes of the configurations built;
// a route dropped by a reload is dropped here at the next build of a
// forward-auth route (when the map holds over four times the routes).
type fwdAuthCheckers struct {
	mu sync.Mutex
	m  map[string]fwdAuthChecker
}

type fwdAuthChecker struct {
	cfg config.RouteForwardAuth
	c   *fwdauth.Checker
}

// forwardAuth returns route rc's authorization service; nil unless its
// auth is forward.
func (g *Gateway) forwardAuth(cfg *config.Config, rc *config.Route) (*proxy.ForwardAuth, error) {
	if rc.Auth != config.AuthForward || rc.ForwardAuth == nil {
		return nil, nil
	}
	fc := *rc.ForwardAuth
	s := &g.fwdAuth
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]fwdAuthChecker)
	}
	c := s.m[rc.Name]
	if c.c == nil || !sameForwardAuth(c.cfg, fc) {
		k, err := fwdauth.New(fwdauth.Options{URL: fc.URL, Timeout: fc.Timeout, CopyRequestHeaders: fc.CopyRequestHeaders,
			CopyResponseHeaders: fc.CopyResponseHeaders, CacheTTL: fc.CacheTTL, MaxInFlight: int(fc.MaxInFlight)})
		if err != nil {
			return nil, fmt.Errorf("routes[%s].forward_auth: %w", rc.Name, err)
		}
		if len(s.m) > 4*len(cfg.Routes) {
			clear(s.m)
		}
		c = fwdAuthChecker{cfg: fc, c: k}
		s.m[rc.Name] = c
	}
	return &proxy.ForwardAuth{Checker: c.c, OnErrorAllow: fc.OnError == config.ForwardAuthAllow,
		CopyResponseHeaders: fc.CopyResponseHeaders}, nil
}

// each calls yield with the checker of every forward-auth route of the
// table serving now (for fwdauth.Collector).
func (g *Gateway) eachForwardAuth(yield func(route string, c *fwdauth.Checker)) {
	for _, rt := range g.handler.Table().Routes() {
		if rt.ForwardAuth != nil && rt.ForwardAuth.Checker != nil {
			yield(rt.Name, rt.ForwardAuth.Checker)
		}
	}
}

// sameForwardAuth reports whether a and b configure the same checker.
func sameForwardAuth(a, b config.RouteForwardAuth) bool {
	return a.URL == b.URL && a.Timeout == b.Timeout && a.CacheTTL == b.CacheTTL && a.OnError == b.OnError &&
		a.MaxInFlight == b.MaxInFlight && slices.Equal(a.CopyRequestHeaders, b.CopyRequestHeaders) &&
		slices.Equal(a.CopyResponseHeaders, b.CopyResponseHeaders)
}
