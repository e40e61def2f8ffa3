package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/limits"
	"gopkg.in/yaml.v3"
)

// This file reads the consumer apps (`apps`), a route's `auth` and
// `anonymous_limits`, and the admin listener's token. The apps in the
// file seed levee's app store; see docs/apps.md for how they interact
// with changes made through the admin API.

// App is one consumer app the file defines (`apps[i]`).
type App struct {
	// ID identifies the app (`id`, required, unique): 1 to 64 characters
	// from a-z, 0-9, "_", "." and "-".
	ID string
	// Name is a human label (`name`, 1 to 128 bytes of text without
	// control characters). Default: the ID.
	Name string
	// Status is AppStatusActive ("active", the default,
	// DefaultAppStatus) or AppStatusSuspended ("suspended": every key of
	// the app is refused).
	Status string
	// APIKeySHA256 are the SHA-256 hashes of the app's API keys, each 64
	// hex digits, stored lower-case (`api_key_sha256`, optional, at most
	// 16, unique across every app). The file never holds a key itself.
	APIKeySHA256 []string
	// Grants are the names of the routes the app may call (`grants`,
	// optional, each a route name in `routes`, no duplicates). nil means
	// none.
	Grants []string
	// Limits are the app's own limits across all its routes (`limits`,
	// optional). The zero value means no limit.
	Limits AppLimits
	// RouteLimits overrides the rate and quota on single routes
	// (`route_limits`, optional): a mapping of route name (one of Grants)
	// to {rate, burst, quota}. nil when omitted.
	RouteLimits map[string]RouteLimit
}

// AppLimits are an app's limits (`apps[i].limits`). Every field is
// optional; zero means that limit is off.
type AppLimits struct {
	// Rate is the sustained rate in requests per second (`rate`, a number
	// from 0.000001, one request per 1e6 s, to 1000000000, fractions
	// allowed; limits.CheckRate). 0 when omitted: no rate limit.
	Rate float64
	// Burst is the most requests admitted at once above Rate (`burst`, a
	// whole number 1 to 1000000000, only with rate, refilling in at most
	// 1e9 s: burst/rate <= 1e9; limits.CheckBurst). Default
	// max(1, ceil(Rate)) when Rate is set, else 0.
	Burst int
	// Quota caps the requests per period (`quota`, optional). nil: none.
	Quota *Quota
	// MaxConcurrency caps the app's requests in flight (`max_concurrency`,
	// a whole number 1 to 100000). 0 when omitted: no cap.
	MaxConcurrency int
}

// RouteLimit is an app's rate and quota on one route
// (`apps[i].route_limits.<route>`); fields as in AppLimits.
type RouteLimit struct {
	Rate  float64
	Burst int
	Quota *Quota
}

// Quota caps the requests in each period (`quota`).
type Quota struct {
	// Requests is the most requests per period (`requests`, a whole
	// number 1 to 1000000000000). 0 when omitted: requests not counted.
	Requests int64
	// Rows is the most rows of data answers per period (`rows`, 1 to
	// 10^15), counted as they stream. 0 when omitted: none counted.
	Rows int64
	// Bytes is the most bytes of answers per period (`bytes`, 1 to 2^50):
	// a data answer's rows as written, a proxied answer's body. 0 when
	// omitted: none counted. At least one of requests, rows and bytes.
	Bytes int64
	// Per is the period (`per`, required, a duration from 1s to 8784h).
	Per time.Duration
}

// AnonymousLimits rate-limits a route's requests per client IP address
// (`routes[i].anonymous_limits`), for routes with auth none.
type AnonymousLimits struct {
	// Rate is the sustained rate per client IP in requests per second
	// (`rate`, required, from 0.000001 to 1000000000, as AppLimits.Rate).
	Rate float64
	// Burst is the most requests one client IP may send at once above
	// Rate (`burst`, a whole number 1 to 1000000000, burst/rate <= 1e9 s,
	// as AppLimits.Burst). Default max(1, ceil(Rate)).
	Burst int
}

// The accepted values of App.Status.
const (
	AppStatusActive    = "active"
	AppStatusSuspended = "suspended"
)

// The accepted values of Route.Auth.
const (
	// AuthNone admits every request; AnonymousLimits may limit it per IP.
	AuthNone = "none"
	// AuthAPIKey admits requests carrying an active API key of an active
	// app granted the route.
	AuthAPIKey = "api_key"
	// AuthHMAC admits requests signed with an app's key.
	AuthHMAC = "hmac"
	// AuthJWT admits requests with a JWT of an identity.jwt_issuers
	// issuer naming a granted app (identity.go).
	AuthJWT = "jwt"
	// AuthForward admits requests an authorization service answers 2xx
	// (the route's forward_auth).
	AuthForward = "forward"
	// AuthBasic admits requests with HTTP basic credentials: an active
	// app's id as the user and one of its passwords (docs/authentication.md).
	AuthBasic = "basic"
	// AuthClientCert admits requests over a connection whose verified
	// client certificate (tls.client_auth) maps to an active app
	// (route_client_cert.go, docs/authentication.md).
	AuthClientCert = "client_cert"
)

var (
	appStatuses = []string{AppStatusActive, AppStatusSuspended}
	authModes   = []string{AuthNone, AuthAPIKey, AuthHMAC, AuthJWT, AuthForward, AuthBasic, AuthClientCert}
)

// AuthModes returns every value routes[].auth accepts, so the code that
// maps them (the gateway) can be checked against the whole list.
func AuthModes() []string { return slices.Clone(authModes) }

// defaultBurst is the burst of a rate limit whose `burst` is omitted.
func defaultBurst(rate float64) int {
	return int(limits.DefaultBurst(rate))
}

// rateBurst reads a limits block (fields f of mapping n, described by b)
// into dst, whose rate and burst are *rate and *burst: burst needs rate
// (unless b requires rate), must not take longer than limits allow to
// refill (limits.CheckBurst), and takes defaultBurst when omitted.
func (p *parser) rateBurst(f map[string]*yaml.Node, n *yaml.Node, path string, b *engine.Block, dst any, rate *float64, burst *int) {
	if v := f["burst"]; v != nil && f["rate"] == nil && !b.Field("rate").Required {
		p.Add(v, engine.Key(path, "burst"), "needs rate")
		delete(f, "burst")
	}
	bad := p.Bind(f, n, path, b, dst)
	switch v := f["burst"]; {
	case bad["rate"]:
	case v == nil && *rate > 0:
		*burst = defaultBurst(*rate)
	case v != nil && !bad["burst"]:
		if problem := limits.CheckBurst(*rate, int64(*burst)); problem != "" {
			p.Add(v, engine.Key(path, "burst"), "%s", problem) // burst × interval too long
		}
	}
}

// checkRate refuses a rate of 0 and one slower than the rate limiter can
// keep (limits.CheckRate).
func checkRate(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	problem := limits.CheckRate(*ptr.(*float64))
	if *ptr.(*float64) == 0 {
		problem = "must be greater than 0, got 0 (omit it for no rate limit)"
	}
	if problem != "" {
		p.Add(n, path, "%s", problem)
	}
	return problem == ""
}

// checkQuotaPer bounds a quota's period.
func checkQuotaPer(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	if d := *ptr.(*time.Duration); d < minQuotaPer || d > maxQuotaPer {
		p.Add(n, path, "must be from %s to %s, got %s", minQuotaPer, maxQuotaPer, engine.Describe(n))
		return false
	}
	return true
}

// appLimits reads `apps[i].limits`.
func (p *parser) appLimits(l *AppLimits, path string, n *yaml.Node) {
	f, ok := p.Block(path, n, appLimitsBlock)
	if !ok {
		return
	}
	p.rateBurst(f, n, path, appLimitsBlock, l, &l.Rate, &l.Burst) // and quota, max_concurrency
	p.quotaCounts(f["quota"], engine.Key(path, "quota"))
}

// quotaCounts refuses a quota block that counts nothing: it needs at least
// one of requests, rows and bytes.
func (p *parser) quotaCounts(n *yaml.Node, path string) {
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "requests", "rows", "bytes":
			return
		}
	}
	p.Add(n, path, "needs at least one of requests, rows and bytes")
}

// anonymousLimits reads `routes[i].anonymous_limits`.
func (p *parser) anonymousLimits(path string, n *yaml.Node) *AnonymousLimits {
	a := &AnonymousLimits{}
	f, ok := p.Block(path, n, anonymousLimitsBlock)
	if !ok {
		return a
	}
	p.rateBurst(f, n, path, anonymousLimitsBlock, a, &a.Rate, &a.Burst)
	return a
}

// appsSeen is what the cross-app checks remember.
type appsSeen struct {
	ids  map[string]int    // app id -> index
	keys map[string]string // key hash -> path of its first use
}

// apps reads `apps`. routeNames are the valid route names, for grants;
// routesOK is false when routes could not be read, in which case grants
// are not checked against them.
func (p *parser) apps(c *Config, n *yaml.Node, routes routeNames, routesOK bool) {
	const path = "apps"
	items, ok := p.Sequence(path, n)
	if !ok {
		return
	}
	if len(items) > maxApps {
		p.Add(n, path, "at most %d apps, got %d", maxApps, len(items))
		return
	}
	seen := appsSeen{ids: map[string]int{}, keys: map[string]string{}}
	c.Apps = make([]App, 0, len(items))
	for i, item := range items {
		c.Apps = append(c.Apps, p.app(engine.Index(path, i), i, item, &seen, routes, routesOK))
	}
}

// app reads one item of `apps`.
func (p *parser) app(path string, i int, n *yaml.Node, seen *appsSeen, routes routeNames, routesOK bool) App {
	a := App{Status: DefaultAppStatus}
	if n.Kind == yaml.AliasNode {
		return a
	}
	if engine.IsNull(n) || n.Kind != yaml.MappingNode {
		p.Add(n, path, "must be a mapping with id and grants, got %s", engine.Describe(n))
		return a
	}
	f, ok := p.Block(path, n, appBlock)
	if !ok {
		return a
	}
	bad := p.Bind(f, n, path, appBlock, &a) // id, name and status
	if !bad["id"] {
		if j, dup := seen.ids[a.ID]; dup {
			p.Add(f["id"], engine.Key(path, "id"), "duplicate app id %s (first at apps[%d])", engine.Quote(a.ID), j)
		} else {
			seen.ids[a.ID] = i
		}
	}
	if f["name"] == nil {
		a.Name = a.ID
	}
	if v := f["api_key_sha256"]; v != nil {
		a.APIKeySHA256 = p.keyHashes(engine.Key(path, "api_key_sha256"), v, seen)
	}
	if v := f["grants"]; v != nil {
		a.Grants = p.grants(engine.Key(path, "grants"), v, routes, routesOK)
	}
	if v := f["limits"]; v != nil {
		p.appLimits(&a.Limits, engine.Key(path, "limits"), v)
	}
	if v := f["route_limits"]; v != nil {
		a.RouteLimits = p.routeLimits(engine.Key(path, "route_limits"), v, a.Grants)
	}
	return a
}

// checkAppName checks an app's display name (the store's rule).
func checkAppName(s string) string { return limits.CheckAppName(s) }

// keyHashes reads `api_key_sha256`: hex SHA-256 hashes, unique across
// every app, stored lower-case.
func (p *parser) keyHashes(path string, n *yaml.Node, seen *appsSeen) []string {
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) > maxAppKeys {
		p.Add(n, path, "at most %d keys, got %d", maxAppKeys, len(items))
		return nil
	}
	var out []string
	for i, item := range items {
		ip := engine.Index(path, i)
		s, ok := p.Str(ip, item)
		if !ok {
			continue
		}
		h := strings.ToLower(s)
		if !isHexSHA256(h) {
			p.Add(item, ip, "must be a SHA-256 as 64 hex digits (the file holds hashes, never keys), got %s", engine.Quote(s))
			continue
		}
		if first, dup := seen.keys[h]; dup {
			p.Add(item, ip, "duplicate key hash (first at %s)", first)
			continue
		}
		seen.keys[h] = ip
		out = append(out, h)
	}
	return out
}

func isHexSHA256(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}

// grants reads `grants`: distinct names of routes in the file. routes
// holds the valid route names (routeNames: a set, since 10,000 apps of
// two grants each against 5,000 routes were 100 million comparisons at
// every reload).
func (p *parser) grants(path string, n *yaml.Node, routes routeNames, routesOK bool) []string {
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) > maxAppGrants {
		p.Add(n, path, "at most %d routes, got %d", maxAppGrants, len(items))
		return nil
	}
	out := make([]string, 0, len(items))
	at := make([]int, 0, len(items)) // at[k]: the item out[k] came from
	var first map[string]int         // a long list's duplicates; a short one's are searched in out
	if len(items) > 16 {
		first = make(map[string]int, len(items))
	}
	for i, item := range items {
		if !engine.IsString(item) {
			p.Str(engine.Index(path, i), item) // reports it (an alias silently)
			continue
		}
		s := item.Value
		j, dup := first[s]
		if first == nil {
			if k := slices.Index(out, s); k >= 0 {
				j, dup = at[k], true
			}
		}
		switch {
		case dup:
			p.Add(item, engine.Index(path, i), "duplicate route %s (first at grants[%d])", engine.Quote(s), j)
			continue
		case routesOK && !routes.set[s]:
			p.Add(item, engine.Index(path, i), "unknown route %s%s", engine.Quote(s), engine.Suggest(s, routes.names))
			continue
		}
		out = append(out, s)
		at = append(at, i)
		if first != nil {
			first[s] = i
		}
	}
	return out
}

// routeNames are the file's valid route names, in file order (names, for
// suggestions) and as a set (set, for the checks).
type routeNames struct {
	names []string
	set   map[string]bool
}

func newRouteNames(names []string) routeNames {
	rn := routeNames{names: names, set: make(map[string]bool, len(names))}
	for _, n := range names {
		rn.set[n] = true
	}
	return rn
}

// routeLimits reads `route_limits`: each key one of the app's grants.
func (p *parser) routeLimits(path string, n *yaml.Node, grants []string) map[string]RouteLimit {
	if n.Kind == yaml.AliasNode {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.Add(n, path, "must be a mapping of route names to {rate, burst, quota}, got %s", engine.Describe(n))
		return nil
	}
	out := map[string]RouteLimit{}
	for _, e := range p.Pairs(path, n) {
		rp := engine.Key(path, e.Key)
		if !slices.Contains(grants, e.Key) {
			p.Add(e.K, rp, "route %s is not in this app's grants", engine.Quote(e.Key))
			continue
		}
		var rl RouteLimit
		f, ok := p.Block(rp, e.V, routeLimitBlock)
		if !ok {
			continue
		}
		p.rateBurst(f, e.V, rp, routeLimitBlock, &rl, &rl.Rate, &rl.Burst) // and quota
		p.quotaCounts(f["quota"], engine.Key(rp, "quota"))
		out[e.Key] = rl
	}
	return out
}

// isLoopbackListen reports whether a listener address binds only the
// loopback interface: host "localhost", 127.0.0.0/8 or ::1. An empty
// host or an unspecified address binds every interface.
func isLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// Bounds of an admin token file.
const (
	maxTokenFileBytes = 4 << 10
	minTokenLen       = 16
)

// ReadTokenFile reads the admin API token from path: the file's content
// with surrounding white space removed. A file that is not a regular
// file, is larger than 4KiB, or holds fewer than 16 characters is an
// error, whose message does not repeat the content.
func ReadTokenFile(path string) (string, error) {
	if problem := checkReadableFile(path); problem != "" {
		return "", errors.New(problem)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v", engine.QuoteMax(path, maxPathShown), pathErrCause(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v", engine.QuoteMax(path, maxPathShown), pathErrCause(err))
	}
	if len(b) > maxTokenFileBytes {
		return "", fmt.Errorf("token file %s is larger than %s", engine.QuoteMax(path, maxPathShown), engine.FormatSize(maxTokenFileBytes))
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", fmt.Errorf("token file %s is empty", engine.QuoteMax(path, maxPathShown))
	case len(tok) < minTokenLen:
		return "", fmt.Errorf("token in %s is shorter than %d characters", engine.QuoteMax(path, maxPathShown), minTokenLen)
	case strings.ContainsFunc(tok, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return "", fmt.Errorf("token in %s must be one line of printable text", engine.QuoteMax(path, maxPathShown))
	}
	return tok, nil
}

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	quotaBlock = engine.NewBlock(
		engine.Field{Name: "requests", Kind: engine.KindInt, Lo: 1, Hi: maxQuotaRequests, Doc: "requests allowed per period",
			Bind: engine.At(func(q *Quota) *int64 { return &q.Requests })},
		engine.Field{Name: "rows", Kind: engine.KindInt, Lo: 1, Hi: limits.MaxQuotaRows, Doc: "rows of data answers allowed per period, counted as they stream",
			Bind: engine.At(func(q *Quota) *int64 { return &q.Rows })},
		engine.Field{Name: "bytes", Kind: engine.KindInt, Lo: 1, Hi: limits.MaxQuotaBytes, Doc: "bytes of answers allowed per period (data rows as written, proxied bodies), counted as they stream",
			Bind: engine.At(func(q *Quota) *int64 { return &q.Bytes })},
		engine.Field{Name: "per", Kind: engine.KindDuration, Required: true, Doc: "the period, from 1s to 8784h",
			Check: checkQuotaPer, Bind: engine.At(func(q *Quota) *time.Duration { return &q.Per })},
	)
	anonymousLimitsBlock = engine.NewBlock(
		engine.Field{Name: "rate", Kind: engine.KindNumber, Flo: 0, Fhi: maxRate, Required: true, Doc: "requests per second, sustained; greater than 0",
			Check: checkRate, Bind: engine.At(func(a *AnonymousLimits) *float64 { return &a.Rate })},
		engine.Field{Name: "burst", Kind: engine.KindInt, Lo: 1, Hi: maxBurst, Doc: "requests at once above the rate; max(1, ceil(rate)) when omitted",
			Bind: engine.At(func(a *AnonymousLimits) *int { return &a.Burst })},
	)
	routeLimitBlock = engine.NewBlock(
		engine.Field{Name: "rate", Kind: engine.KindNumber, Flo: 0, Fhi: maxRate, Doc: "requests per second, sustained; greater than 0",
			Check: checkRate, Bind: engine.At(func(l *RouteLimit) *float64 { return &l.Rate })},
		engine.Field{Name: "burst", Kind: engine.KindInt, Lo: 1, Hi: maxBurst, Doc: "requests at once above the rate; only with rate",
			Bind: engine.At(func(l *RouteLimit) *int { return &l.Burst })},
		engine.Field{Name: "quota", Kind: engine.KindBlock, Sub: quotaBlock, Doc: "requests per period",
			Bind: engine.Opt(func(l *RouteLimit) **Quota { return &l.Quota }, func() *Quota { return &Quota{} })},
	)
	appLimitsBlock = engine.NewBlock(
		engine.Field{Name: "rate", Kind: engine.KindNumber, Flo: 0, Fhi: maxRate, Doc: "requests per second, sustained; greater than 0",
			Check: checkRate, Bind: engine.At(func(l *AppLimits) *float64 { return &l.Rate })},
		engine.Field{Name: "burst", Kind: engine.KindInt, Lo: 1, Hi: maxBurst, Doc: "requests at once above the rate; only with rate",
			Bind: engine.At(func(l *AppLimits) *int { return &l.Burst })},
		engine.Field{Name: "quota", Kind: engine.KindBlock, Sub: quotaBlock, Doc: "requests per period",
			Bind: engine.Opt(func(l *AppLimits) **Quota { return &l.Quota }, func() *Quota { return &Quota{} })},
		engine.Field{Name: "max_concurrency", Kind: engine.KindInt, Lo: 1, Hi: maxAppConcurrency, Doc: "requests in flight at once",
			Bind: engine.At(func(l *AppLimits) *int { return &l.MaxConcurrency })},
	)
	appBlock = engine.NewBlock(
		engine.Field{Name: "id", Kind: engine.KindString, Required: true, Pattern: namePattern, Doc: "the app's id, unique",
			Check: checkName, Bind: engine.At(func(a *App) *string { return &a.ID })},
		engine.Field{Name: "name", Kind: engine.KindString, Doc: "display name; the id when omitted",
			Check: engine.ProblemOf(checkAppName), Bind: engine.At(func(a *App) *string { return &a.Name })},
		engine.Field{Name: "status", Kind: engine.KindEnum, Enum: appStatuses, Def: DefaultAppStatus, Doc: "a suspended app's keys are refused",
			Bind: engine.At(func(a *App) *string { return &a.Status })},
		engine.Field{Name: "api_key_sha256", Kind: engine.KindList, MaxItems: maxAppKeys, Item: &engine.Field{Kind: engine.KindString, Pattern: "^[0-9a-fA-F]{64}$"},
			Doc: "SHA-256 of each API key, as hex; unique across apps", Secret: true},
		engine.Field{Name: "grants", Kind: engine.KindList, MaxItems: maxAppGrants, Item: &engine.Field{Kind: engine.KindString, Pattern: namePattern}, Doc: "the routes the app may call"},
		engine.Field{Name: "limits", Kind: engine.KindBlock, Sub: appLimitsBlock, Doc: "the app's limits across its routes"},
		engine.Field{Name: "route_limits", Kind: engine.KindMap, Sub: routeLimitBlock, Doc: "per route overrides; each key one of grants"},
	)
)

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultAppStatus is App.Status when omitted.
	DefaultAppStatus = AppStatusActive
)

const (
	// An app's bounds are package limits', which the store and the rate
	// limiter apply too, so that validate refuses what run would.
	maxApps           = limits.MaxApps
	maxAppKeys        = limits.MaxKeys
	maxAppGrants      = limits.MaxGrants
	maxAppConcurrency = limits.MaxConcurrency
	maxRate           = limits.MaxRate
	maxBurst          = limits.MaxBurst
	maxQuotaRequests  = limits.MaxQuotaRequests
	minQuotaPer       = limits.MinQuotaPer
	maxQuotaPer       = limits.MaxQuotaPer
)
