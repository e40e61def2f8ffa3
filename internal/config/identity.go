package config

import (
	"net/url"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/levee-gw/levee/internal/config/engine"
)

// Identity declares the identity providers routes name (`identity`,
// optional; docs/authentication.md).
type Identity struct {
	// JWTIssuers are the JWT issuers by name (`jwt_issuers`), for routes
	// with `auth: jwt`. JWTIssuerOrder is their names in file order.
	JWTIssuers     map[string]*JWTIssuer
	JWTIssuerOrder []string
}

// JWTIssuer is one `identity.jwt_issuers.<name>`.
type JWTIssuer struct {
	Name string
	// Issuer is the iss claim every token must carry (`issuer`, required).
	Issuer string
	// Discovery is the OpenID provider's URL or discovery document URL
	// (`discovery`); or JWKSURI, its key set's URL (`jwks_uri`). Exactly
	// one, http:// or https://.
	Discovery, JWKSURI string
	// Audiences: a token's aud must hold one (`audiences`, required).
	Audiences []string
	// Algorithms is the signature allow-list (`algorithms`, from RS256,
	// RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA).
	// Default [RS256, ES256].
	Algorithms []string
	// ClockSkew is allowed on exp, nbf and iat (`clock_skew`, 0 to 5m).
	// Default 30s.
	ClockSkew time.Duration
	// MaxTokenBytes bounds a token (`max_token_bytes`, 1 KiB to 64 KiB).
	// Default 8 KiB.
	MaxTokenBytes int64
	// AppClaim names the claim that names the app (`app_claim`); or App,
	// one app for every token (`app`). Default app_claim azp.
	AppClaim, App string
	// ScopesClaim names the scopes claim (`scopes_claim`); when set, a
	// token must hold the route's name among its scopes.
	ScopesClaim string
	// MinRefreshInterval is the least time between two fetches of the key
	// set (`min_refresh_interval`, 1s to 10m): an unknown kid triggers at
	// most one fetch per interval. Default 30s.
	MinRefreshInterval time.Duration
	// PerSubject limits each end user (the token's sub) inside each app
	// (`per_subject`: rate, burst, quota as in apps[].route_limits; nil:
	// no limit). Shared through Redis in a cluster like the app limits.
	PerSubject *RouteLimit
}

// JWTAlgorithms are the algorithms identity.jwt_issuers.*.algorithms
// accepts (jwtauth.Algorithms). HS* is not among them: never keyed by a
// public key.
var JWTAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

const (
	DefaultJWTClockSkew     = 30 * time.Second
	MaxJWTClockSkew         = 5 * time.Minute
	DefaultJWTMaxTokenBytes = 8 << 10
	MaxJWTMaxTokenBytes     = 64 << 10
	DefaultJWTAppClaim      = "azp"
	DefaultJWTMinRefresh    = 30 * time.Second
	// MaxJWTIssuers bounds identity.jwt_issuers (each holds a key set).
	MaxJWTIssuers = 32
)

var (
	identityBlock = engine.NewBlock(
		engine.Field{Name: "jwt_issuers", Kind: engine.KindMap, Sub: jwtIssuerBlock, MinItems: 1, Doc: "JWT issuers by name, for routes with auth: jwt"},
	)
	jwtIssuerBlock = engine.NewBlock(
		engine.Field{Name: "issuer", Kind: engine.KindString, Required: true, NonEmpty: true, Doc: "the iss claim every token must carry",
			Bind: engine.At(func(j *JWTIssuer) *string { return &j.Issuer })},
		engine.Field{Name: "discovery", Kind: engine.KindString, Doc: "the OpenID provider's URL (its /.well-known/openid-configuration names the key set); or jwks_uri",
			Check: checkHTTPURL, Bind: engine.At(func(j *JWTIssuer) *string { return &j.Discovery })},
		engine.Field{Name: "jwks_uri", Kind: engine.KindString, Doc: "the key set's URL; or discovery",
			Check: checkHTTPURL, Bind: engine.At(func(j *JWTIssuer) *string { return &j.JWKSURI })},
		engine.Field{Name: "audiences", Kind: engine.KindList, Required: true, MinItems: 1, MaxItems: 64, Item: &engine.Field{Kind: engine.KindString, NonEmpty: true},
			Doc: "a token's aud must hold one of these", Check: checkStrings(func(s string) string {
				if s == "" {
					return "must not be empty"
				}
				return ""
			}), Bind: engine.At(func(j *JWTIssuer) *[]string { return &j.Audiences })},
		engine.Field{Name: "algorithms", Kind: engine.KindList, MinItems: 1, MaxItems: 10, Item: &engine.Field{Kind: engine.KindEnum, Enum: JWTAlgorithms},
			Doc: "signature algorithms allowed; [RS256, ES256] when omitted; HS* and none never", Check: checkStrings(func(s string) string {
				if !slices.Contains(JWTAlgorithms, s) {
					return "must be one of " + strings.Join(JWTAlgorithms, ", ") + " (HS* and none are never accepted), got " + engine.Quote(s)
				}
				return ""
			}), Bind: engine.At(func(j *JWTIssuer) *[]string { return &j.Algorithms })},
		engine.Field{Name: "clock_skew", Kind: engine.KindDuration, Def: DefaultJWTClockSkew, Doc: "allowed on exp, nbf and iat; 0 to 5m",
			Check: engine.CheckDurationWithin(0, MaxJWTClockSkew), Bind: engine.At(func(j *JWTIssuer) *time.Duration { return &j.ClockSkew })},
		engine.Field{Name: "max_token_bytes", Kind: engine.KindSize, Lo: 1 << 10, Hi: MaxJWTMaxTokenBytes, Def: int64(DefaultJWTMaxTokenBytes), Doc: "largest token, checked before any parsing", NotSecret: "a size in bytes",
			Bind: engine.At(func(j *JWTIssuer) *int64 { return &j.MaxTokenBytes })},
		engine.Field{Name: "app_claim", Kind: engine.KindString, NonEmpty: true, Doc: "the claim naming the app (azp when neither it nor app is set)",
			Bind: engine.At(func(j *JWTIssuer) *string { return &j.AppClaim })},
		engine.Field{Name: "app", Kind: engine.KindString, Pattern: namePattern, Doc: "one app for every token of the issuer; instead of app_claim",
			Bind: engine.At(func(j *JWTIssuer) *string { return &j.App })},
		engine.Field{Name: "scopes_claim", Kind: engine.KindString, NonEmpty: true, Doc: "the scopes claim; when set a token must hold the route's name among its scopes",
			Bind: engine.At(func(j *JWTIssuer) *string { return &j.ScopesClaim })},
		engine.Field{Name: "per_subject", Kind: engine.KindBlock, Sub: routeLimitBlock, Doc: "limits of each end user (the token's sub) inside each app: rate, burst, quota"},
		engine.Field{Name: "min_refresh_interval", Kind: engine.KindDuration, Def: DefaultJWTMinRefresh, Doc: "least time between two fetches of the key set (an unknown kid triggers at most one per interval); 1s to 10m",
			Check: engine.CheckDurationWithin(time.Second, 10*time.Minute), Bind: engine.At(func(j *JWTIssuer) *time.Duration { return &j.MinRefreshInterval })},
	)
	routeJWTBlock = engine.NewBlock(
		engine.Field{Name: "issuers", Kind: engine.KindList, MinItems: 1, MaxItems: MaxJWTIssuers, Item: &engine.Field{Kind: engine.KindString, Pattern: namePattern},
			Doc: "the identity.jwt_issuers whose tokens the route accepts; all of them when omitted", Check: checkStrings(func(s string) string {
				if !validName(s) {
					return "name " + nameRule + ", got " + engine.Quote(s)
				}
				return ""
			}), Bind: engine.At(func(r *RouteJWT) *[]string { return &r.Issuers })},
	)
)

// RouteJWT is a route's `jwt` block.
type RouteJWT struct {
	// Issuers names identity.jwt_issuers entries; empty: every issuer.
	Issuers []string
}

var checkHTTPURL = engine.ProblemOf(func(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "must be an http:// or https:// URL"
	}
	return ""
})

// checkStrings reads a list of strings, each checked by problem (""
// when fine), no duplicates.
func checkStrings(problem func(string) string) func(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	return func(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
		items, ok := p.Sequence(path, n)
		if !ok {
			return false
		}
		var out []string
		for i, item := range items {
			ip := engine.Index(path, i)
			s, sok := p.Str(ip, item)
			if !sok {
				ok = false
				continue
			}
			if msg := problem(s); msg != "" {
				p.Add(item, ip, "%s", msg)
				ok = false
			} else if slices.Contains(out, s) {
				p.Add(item, ip, "duplicate %s", engine.Quote(s))
				ok = false
			} else {
				out = append(out, s)
			}
		}
		if ok {
			*ptr.(*[]string) = out
		}
		return ok
	}
}

// identity reads `identity`.
func (p *parser) identity(path string, n *yaml.Node) *Identity {
	id := &Identity{}
	f, ok := p.Block(path, n, identityBlock)
	if !ok {
		return id
	}
	v := f["jwt_issuers"]
	if v == nil {
		return id
	}
	jp := engine.Key(path, "jwt_issuers")
	if v.Kind != yaml.MappingNode {
		p.Add(v, jp, "must be a mapping of issuer names to issuers, got %s", engine.Describe(v))
		return id
	}
	entries := p.Pairs(jp, v)
	if len(entries) > MaxJWTIssuers {
		p.Add(v, jp, "at most %d issuers, got %d", MaxJWTIssuers, len(entries))
		return id
	}
	id.JWTIssuers = make(map[string]*JWTIssuer, len(entries))
	for _, e := range entries {
		ip := engine.Key(jp, e.Key)
		if !validName(e.Key) {
			p.Add(e.K, ip, "name %s, got %s", nameRule, engine.Quote(e.Key))
		}
		j := &JWTIssuer{Name: e.Key}
		engine.WithDefaults(jwtIssuerBlock, j)
		if bf, ok := p.Block(ip, e.V, jwtIssuerBlock); ok {
			p.Bind(bf, e.V, ip, jwtIssuerBlock, j)
			if v := bf["per_subject"]; v != nil {
				sp := engine.Key(ip, "per_subject")
				if sf, ok := p.Block(sp, v, routeLimitBlock); ok {
					ps := &RouteLimit{}
					p.rateBurst(sf, v, sp, routeLimitBlock, ps, &ps.Rate, &ps.Burst) // and quota
					if ps.Rate == 0 && ps.Quota == nil {
						p.Add(v, sp, "needs rate or quota")
					}
					j.PerSubject = ps
				}
			}
		}
		if (j.Discovery == "") == (j.JWKSURI == "") {
			p.Add(e.V, ip, "exactly one of discovery and jwks_uri is required")
		}
		if j.AppClaim != "" && j.App != "" {
			p.Add(e.V, ip, "app_claim and app exclude each other, got app_claim %s and app %s", engine.Quote(j.AppClaim), engine.Quote(j.App))
		}
		if j.AppClaim == "" && j.App == "" {
			j.AppClaim = DefaultJWTAppClaim
		}
		if len(j.Algorithms) == 0 {
			j.Algorithms = []string{"RS256", "ES256"}
		}
		id.JWTIssuers[e.Key] = j
		id.JWTIssuerOrder = append(id.JWTIssuerOrder, e.Key)
	}
	return id
}

// routeJWT reads a route's `jwt` block.
func (p *parser) routeJWT(path string, n *yaml.Node) *RouteJWT {
	rj := &RouteJWT{}
	if f, ok := p.Block(path, n, routeJWTBlock); ok {
		p.Bind(f, n, path, routeJWTBlock, rj)
	}
	return rj
}

// checkRouteIdentity checks, after routes and identity are read, that
// every route with auth: jwt has issuers to take tokens from, and names
// only declared ones.
func (p *parser) checkRouteIdentity(c *Config, root *yaml.Node) {
	var declared []string
	if c.Identity != nil {
		declared = c.Identity.JWTIssuerOrder
	}
	for i, r := range c.Routes {
		path := engine.Index("routes", i)
		if r.Auth != AuthJWT {
			if r.JWT != nil {
				p.Add(root, engine.Key(path, "jwt"), "only allowed with auth: jwt, got auth %s", engine.Quote(r.Auth))
			}
			continue
		}
		if len(declared) == 0 {
			p.Add(root, engine.Key(path, "auth"), "auth: jwt needs identity.jwt_issuers")
			continue
		}
		if r.JWT == nil {
			continue
		}
		for _, name := range r.JWT.Issuers {
			if !slices.Contains(declared, name) {
				p.Add(root, engine.Key(engine.Key(path, "jwt"), "issuers"), "%s is not in identity.jwt_issuers (%s)", engine.Quote(name), strings.Join(declared, ", "))
			}
		}
	}
}
