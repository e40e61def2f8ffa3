package gateway

// JWT issuers (identity.jwt_issuers) for routes with auth: jwt: one
// jwtauth.KeySet per issuer, created and first fetched when a
// configuration naming it is built (at start, or by the reload that adds
// it), then kept across reloads while its key source and name stay the
// same, so a reload neither refetches nor forgets the keys. The last good
// key set is written to state_dir/jwks-<name>.json (0600) and read back
// when the provider is down at start.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/jwtauth"
	"github.com/levee-gw/levee/internal/ratelimit"
)

// jwtKeySets are the key sets by issuer name, with the source they were
// made for. Bounded by config.MaxJWTIssuers names per configuration; an
// issuer dropped by a reload is dropped here at the next build.
type jwtKeySets struct {
	mu   sync.Mutex
	sets map[string]jwtKeySet
}

type jwtKeySet struct {
	source string // discovery or jwks_uri, with a prefix saying which
	keys   *jwtauth.KeySet
}

// jwtClient fetches discovery documents and key sets: its own timeout on
// top of the per-fetch deadline, no cookies, at most 3 redirects.
var jwtClient = &http.Client{
	Timeout: jwtauth.DefaultFetchTimeout,
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return http.ErrUseLastResponse
		}
		return nil
	},
}

// jwtIssuers returns the issuers route rc accepts; nil unless its auth is
// jwt. A key set that cannot be fetched and has no state file is not an
// error: the route answers 401 key_unavailable until a fetch succeeds
// (tried again at most every min_refresh_interval), and the failure
// is logged.
func (g *Gateway) jwtIssuers(cfg *config.Config, rc *config.Route) ([]*jwtauth.Issuer, error) {
	if rc.Auth != config.AuthJWT || cfg.Identity == nil {
		return nil, nil
	}
	names := cfg.Identity.JWTIssuerOrder
	if rc.JWT != nil && len(rc.JWT.Issuers) > 0 {
		names = rc.JWT.Issuers
	}
	out := make([]*jwtauth.Issuer, 0, len(names))
	for _, name := range names {
		ic := cfg.Identity.JWTIssuers[name]
		if ic == nil {
			return nil, fmt.Errorf("issuer %q is not in identity.jwt_issuers", name)
		}
		ks, err := g.jwtKeySet(cfg, ic)
		if err != nil {
			return nil, err
		}
		out = append(out, (&jwtauth.Issuer{
			Name: name, Issuer: ic.Issuer, Audiences: ic.Audiences, Algorithms: ic.Algorithms,
			ClockSkew: ic.ClockSkew, MaxTokenBytes: int(ic.MaxTokenBytes),
			AppClaim: ic.AppClaim, App: ic.App, ScopesClaim: ic.ScopesClaim, Keys: ks,
			Claims: boundClaims(rc),
			Cache:  jwtauth.CacheOptions{MaxEntries: jwtauth.DefaultCacheEntries, MaxTTL: jwtauth.DefaultCacheTTL},
		}).Init())
	}
	return out, nil
}

func (g *Gateway) jwtKeySet(cfg *config.Config, ic *config.JWTIssuer) (*jwtauth.KeySet, error) {
	source := "jwks_uri " + ic.JWKSURI
	if ic.Discovery != "" {
		source = "discovery " + ic.Discovery
	}
	source += " every " + ic.MinRefreshInterval.String()
	s := &g.jwtKeys
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sets == nil {
		s.sets = make(map[string]jwtKeySet)
	}
	if cur, ok := s.sets[ic.Name]; ok && cur.source == source {
		return cur.keys, nil
	}
	if len(s.sets) >= 4*config.MaxJWTIssuers {
		clear(s.sets) // names of removed issuers: start over, bounded
	}
	state := ""
	if err := os.MkdirAll(cfg.StateDir, 0o750); err == nil {
		state = filepath.Join(cfg.StateDir, "jwks-"+ic.Name+".json")
	}
	ks, err := jwtauth.NewKeySet(jwtauth.KeySetOptions{JWKSURI: ic.JWKSURI, Discovery: ic.Discovery, Client: jwtClient, StateFile: state,
		MinInterval: ic.MinRefreshInterval})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), jwtauth.DefaultFetchTimeout)
	defer cancel()
	if err := ks.Start(ctx); err != nil && g.logger != nil {
		g.logger.Warn("jwt issuer: no key set yet; its routes answer 401 key_unavailable until a fetch succeeds",
			"issuer", ic.Name, "source", source, "error", err.Error())
	}
	s.sets[ic.Name] = jwtKeySet{source: source, keys: ks}
	return ks, nil
}

// jwtSubjectLimits are the per_subject policies of route rc's issuers,
// in jwtIssuers' order (the zero Policy for an issuer without one).
func jwtSubjectLimits(cfg *config.Config, rc *config.Route) ([]ratelimit.Policy, error) {
	if rc.Auth != config.AuthJWT || cfg.Identity == nil {
		return nil, nil
	}
	names := cfg.Identity.JWTIssuerOrder
	if rc.JWT != nil && len(rc.JWT.Issuers) > 0 {
		names = rc.JWT.Issuers
	}
	out := make([]ratelimit.Policy, len(names))
	some := false
	for i, name := range names {
		ic := cfg.Identity.JWTIssuers[name]
		if ic == nil || ic.PerSubject == nil {
			continue
		}
		ps := ic.PerSubject
		var requests int64
		var per time.Duration
		if ps.Quota != nil {
			requests, per = ps.Quota.Requests, ps.Quota.Per
		}
		p, err := ratelimit.NewPolicy(ps.Rate, ps.Burst, requests, per)
		if err != nil {
			return nil, fmt.Errorf("identity.jwt_issuers.%s.per_subject: %w", name, err)
		}
		out[i], some = p, true
	}
	if !some {
		return nil, nil
	}
	return out, nil
}

// each calls yield with every key set by issuer name (for the JWKS
// metrics, jwtauth.Collector).
func (s *jwtKeySets) each(yield func(issuer string, ks *jwtauth.KeySet)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, ks := range s.sets {
		yield(name, ks.keys)
	}
}
