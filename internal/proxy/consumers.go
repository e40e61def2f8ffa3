package proxy

// Consumers: who is calling, may they call this route, and at what rate.
//
// A route with Auth other than AuthNone admits only requests that carry
// the credentials of an active app granted that route: an API key
// (Authorization: Bearer KEY or X-Api-Key: KEY, looked up by its SHA-256)
// or an HMAC signature (package auth). The app's limits then apply: its
// rate and quota (for all its routes, and for this route when it has a
// per-route limit), and its cap on requests in flight. A route with
// AuthNone may instead limit each client address (AnonymousLimit).
//
// Apps change at runtime (admin API), so they are not part of the Table:
// the Handler holds an *Apps snapshot of its own, swapped with SwapApps.
// Per-app counters that must outlive a swap (requests in flight, request
// counts for metrics) are carried from one snapshot to the next by NewApps.
// Credentials are not copied here: an Apps reads the app store's identity
// index (auth.Index, one per committed change) through Identities.

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/auth"
	"github.com/levee-gw/levee/internal/jwtauth"
	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/upstream"
)

// AuthMode is how a route identifies its callers.
type AuthMode uint8

const (
	// AuthNone admits anyone; AnonymousLimit may cap each client address.
	AuthNone AuthMode = iota
	// AuthAPIKey admits requests with an active API key of a granted app.
	AuthAPIKey
	// AuthHMAC admits requests signed for a granted app (package auth).
	AuthHMAC
	// AuthJWT admits requests with a JWT of one of Route.JWT naming a
	// granted app (package jwtauth).
	AuthJWT
	// AuthForward admits requests Route.ForwardAuth's service answers 2xx
	// (forwardauth.go); no app is identified.
	AuthForward
	// AuthBasic admits requests with basic credentials of a granted app
	// (basic.go).
	AuthBasic
	// AuthClientCert admits requests over a connection whose verified
	// client certificate maps to a granted app (clientcert.go).
	AuthClientCert
)

// AppHeader carries the authenticated app's id to the upstream. levee
// removes any AppHeader a client sends, on every route, so an upstream can
// trust it.
const AppHeader = "Levee-App"

// App is one consumer app as the request path sees it. Immutable once in
// an Apps snapshot, except for its counters.
type App struct {
	ID        string
	Suspended bool
	// Grants are the names of the routes the app may call.
	Grants map[string]bool
	// Limit applies to all the app's requests; RouteLimits to its requests
	// on one route (by route name), in addition.
	Limit       ratelimit.Policy
	RouteLimits map[string]ratelimit.Policy
	// MaxConcurrency caps the app's requests in flight; 0: no cap.
	MaxConcurrency int
	// Passwords are the app's active basic-auth passwords (AuthBasic).
	Passwords []auth.StoredPassword

	counters  *appCounters      // shared with the same app in later snapshots
	routeKeys map[string]string // limiter key per route in RouteLimits: id + "\x00" + route
	header    []string          // AppHeader's value, made once per snapshot
}

// appCounters are an app's live counters.
type appCounters struct {
	inflight atomic.Int64
	// byClass counts answered requests by status class: 1xx..5xx in 1..5,
	// anything else in 0; and, in throttledSlot, those answered 429 (also
	// counted in 4xx).
	byClass [appSlots]atomic.Uint64
}

// appSlots are the slots of appCounters.byClass: the six status classes
// of levee_app_requests_total, then levee_app_throttled_total.
const (
	throttledSlot = len(classLabels)
	appSlots      = throttledSlot + 1
)

// Identities is what the request path asks of the consumer identity
// index (auth.Index, built once per committed change of the app store):
// the app holding an API key, by the key's SHA-256, its hit confirmed in
// constant time; and the app and secret of a signing key. A digest or key
// ID two apps hold is in neither answer.
type Identities interface {
	LookupKey(digest [32]byte) (appID, keyID string, ok bool)
	auth.Secrets
}

// Apps is an immutable snapshot of the apps and their credentials. The
// zero Apps (and a nil *Apps) holds none: every authenticated route then
// answers 401.
type Apps struct {
	byID map[string]*App
	ids  Identities // nil: no credentials
}

// NewApps builds a snapshot of apps whose credentials ids holds.
// Counters of apps also in prev (by id) are carried over, so requests in
// flight when the snapshot is swapped release the same counters they
// took. A credential whose app is not in apps authenticates no one (401).
func NewApps(apps []*App, ids Identities, prev *Apps) *Apps {
	s := &Apps{byID: make(map[string]*App, len(apps)), ids: ids}
	for _, a := range apps {
		a.header = []string{a.ID}
		a.routeKeys = make(map[string]string, len(a.RouteLimits))
		for r := range a.RouteLimits {
			a.routeKeys[r] = a.ID + "\x00" + r
		}
		if old := prev.App(a.ID); old != nil {
			a.counters = old.counters
		} else {
			a.counters = new(appCounters)
		}
		s.byID[a.ID] = a
	}
	return s
}

// App returns the app with id, or nil.
func (s *Apps) App(id string) *App {
	if s == nil {
		return nil
	}
	return s.byID[id]
}

// LookupSecret implements auth.Secrets over the snapshot's identity index.
func (s *Apps) LookupSecret(keyID string) (appID string, secret []byte, ok bool) {
	if s == nil || s.ids == nil {
		return "", nil, false
	}
	return s.ids.LookupSecret(keyID)
}

// anonKey is the limiter key of a client address on one route.
type anonKey struct {
	route string
	addr  netip.Addr
}

// consumerState is the Handler's consumer machinery; it lives as long as
// the Handler.
type consumerState struct {
	apps     atomic.Pointer[Apps]
	verifier *auth.Verifier
	// appLimits holds rate and quota state per app id and per app id +
	// "\x00" + route; anonLimits per route and client address. Both
	// bounded (ratelimit.Options.Capacity) with eviction.
	appLimits  *ratelimit.Limiter[string]
	anonLimits *ratelimit.Limiter[anonKey]
	// subjectLimits holds a JWT end user's state per issuer, app and
	// subject (subjectlimit.go); bounded, idle keys evicted first.
	subjectLimits *ratelimit.Limiter[string]
	// basic bounds the cost of basic auth (basic.go): its success cache,
	// per-address failure limit and argon2 concurrency.
	basic *auth.BasicGuard
	// auth counts auth results by scheme (authmetrics.go).
	auth authCounters
	// shared, when set, takes the limit decisions instead (shared.go).
	shared SharedLimits
}

// Capacities of the rate-limit state: app keys are few and must not be
// evicted while their quota counts (size it above apps × routes with
// limits); anonymous client addresses are many and are evicted idle first.
const (
	appLimitKeys  = 1 << 20
	anonLimitKeys = 1 << 18
)

func newConsumerState() (*consumerState, error) {
	v, err := auth.NewVerifier(auth.VerifierOptions{})
	if err != nil {
		return nil, err
	}
	al, err := ratelimit.New[string](ratelimit.Options{Capacity: appLimitKeys})
	if err != nil {
		return nil, err
	}
	nl, err := ratelimit.New[anonKey](ratelimit.Options{Capacity: anonLimitKeys})
	if err != nil {
		return nil, err
	}
	sl, err := ratelimit.New[string](ratelimit.Options{Capacity: subjectLimitKeys})
	if err != nil {
		return nil, err
	}
	bg, err := auth.NewBasicGuard(basicGuardOptions())
	if err != nil {
		return nil, err
	}
	return &consumerState{verifier: v, appLimits: al, anonLimits: nl, subjectLimits: sl, basic: bg}, nil
}

// SwapApps makes apps the consumer snapshot for every request that starts
// from now on.
func (h *Handler) SwapApps(apps *Apps) { h.consumers.apps.Store(apps) }

// Apps returns the consumer snapshot in use.
func (h *Handler) Apps() *Apps { return h.consumers.apps.Load() }

// identify authenticates r for rt. It returns the app, or the refusal
// reason and its detail (an auth.Reason, or "suspended" / "no_grant").
// A signature covers the path as sent (x.sentPath when normalising
// changed it, see paths.go).
func (h *Handler) identify(r *http.Request, x *exchange, rt *Route, apps *Apps, now time.Time) (app *App, reason Reason, detail string) {
	x.caller = upstream.Caller{}
	switch rt.Auth {
	case AuthAPIKey:
		key, err := auth.ExtractAPIKey(r.Header)
		if err != nil {
			return nil, ReasonUnauthenticated, authDetail(err)
		}
		if app = apps.byKey(auth.HashKey(key)); app == nil {
			return nil, ReasonUnauthenticated, string(auth.ReasonUnknownKey)
		}
	case AuthHMAC:
		if !auth.IsSigned(r.Header) {
			// Refused before any byte of the body is read: Verify fails on
			// the Authorization header, before it would use the digest.
			_, err := h.consumers.verifier.Verify(asSent(r, x.sentPath), [32]byte{}, apps, now)
			return nil, ReasonUnauthenticated, authDetail(err)
		}
		reserved, room := h.memory.reserveSignedBody(r, x)
		if !room {
			return nil, ReasonMemoryPressure, ""
		}
		digest, held, ok := hashSignedBody(r)
		h.memory.unreserve(x, reserved-held)
		if !ok {
			if bodyTimedOut(x.body.failure()) {
				return nil, ReasonBodyTimeout, "" // the body stopped (server.body_timeout)
			}
			return nil, ReasonBodyTooLarge, ""
		}
		id, err := h.consumers.verifier.Verify(asSent(r, x.sentPath), digest, apps, now)
		if err != nil {
			return nil, ReasonUnauthenticated, authDetail(err)
		}
		if app = apps.App(id); app == nil {
			return nil, ReasonUnauthenticated, string(auth.ReasonUnknownKey)
		}
	case AuthJWT:
		var reason Reason
		var detail string
		if app, reason, detail = identifyJWT(r, x, rt, apps, now); app == nil {
			return nil, reason, detail
		}
	case AuthBasic:
		var reason Reason
		var detail string
		if app, reason, detail = h.identifyBasic(r, x, apps, now); app == nil {
			return nil, reason, detail
		}
	case AuthClientCert:
		id, _, err := apps.identifyClientCert(r.TLS)
		if err != nil {
			return nil, ReasonUnauthenticated, authDetail(err)
		}
		if app = apps.App(id); app == nil {
			return nil, ReasonUnauthenticated, string(auth.ReasonClientCertUnknown)
		}
	default:
		return nil, "", ""
	}
	if app.Suspended {
		// The credentials are valid: the caller is known, and not allowed.
		// 401 would tell it to fix credentials that are fine.
		return nil, ReasonForbidden, "suspended"
	}
	if !app.Grants[rt.Name] {
		return nil, ReasonForbidden, "no_grant"
	}
	x.caller.App = app.ID
	return app, "", ""
}

// identifyJWT verifies the bearer token with the route's issuers in turn
// (the first that accepts it decides). A refusal carries the detail of
// the first issuer whose iss the token did not fail, so a route with
// several issuers says why the token's own issuer refused it. A genuine
// token naming an app the store does not hold is 403 unknown_app (a new
// token would not help); one without the route's name among its scopes,
// when the issuer has scopes_claim, 403 no_scope.
//
// The token's subject and the claims the route binds go to x.caller.
func identifyJWT(r *http.Request, x *exchange, rt *Route, apps *Apps, now time.Time) (*App, Reason, string) {
	tok, err := jwtauth.BearerToken(r.Header)
	if err != nil {
		return nil, ReasonUnauthenticated, string(jwtauth.DetailMissing)
	}
	var first error
	for i, is := range rt.JWT {
		id, err := is.Verify(r.Context(), tok, now)
		if err != nil {
			var e *jwtauth.Error
			if first == nil || (errors.As(first, &e) && e.Detail == jwtauth.DetailWrongIssuer) {
				first = err
			}
			continue
		}
		app := apps.App(id.App)
		if app == nil {
			return nil, ReasonForbidden, "unknown_app"
		}
		if is.ScopesClaim != "" && !id.HasScope(rt.Name) {
			return nil, ReasonForbidden, "no_scope"
		}
		x.caller.Subject, x.caller.Claims = id.Subject, id.Claims
		if i < len(rt.JWTSubjectLimits) && rt.JWTSubjectLimits[i] != (ratelimit.Policy{}) && id.Subject != "" {
			x.subject, x.subjectPolicy = subjectKey(is.Name, app.ID, id.Subject), rt.JWTSubjectLimits[i]
		}
		return app, "", ""
	}
	var e *jwtauth.Error
	if errors.As(first, &e) {
		return nil, ReasonUnauthenticated, string(e.Detail)
	}
	return nil, ReasonUnauthenticated, string(jwtauth.DetailKeyUnavailable) // a route without issuers
}

// byKey returns the app holding the API key whose SHA-256 is sum, or nil:
// the identity index confirms a hit in constant time (auth.Index says why
// a map keyed by the digest leaks nothing of a stored key).
func (s *Apps) byKey(sum [32]byte) *App {
	if s == nil || s.ids == nil {
		return nil
	}
	id, _, ok := s.ids.LookupKey(sum)
	if !ok {
		return nil
	}
	return s.byID[id]
}

// authDetail is the auth.Reason of err, or "malformed_credentials".
func authDetail(err error) string {
	var e *auth.Error
	if errors.As(err, &e) {
		return string(e.Reason)
	}
	return string(auth.ReasonMalformedCredentials)
}

// hashSignedBody buffers a signed request's body (at most
// auth.MaxSignedBodyBytes) and returns its SHA-256 and the bytes its
// buffer holds, replacing r.Body with the buffered copy. ok is false when
// the body is larger (the caller answers 413) or cannot be read.
func hashSignedBody(r *http.Request) (digest [32]byte, held int64, ok bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return sha256.Sum256(nil), 0, true
	}
	if r.ContentLength > auth.MaxSignedBodyBytes {
		return digest, 0, false
	}
	// Never past what reserveSignedBody reserved: a known length in one
	// buffer of that size, an unknown one doubling up to the maximum.
	var body []byte
	var err error
	if r.ContentLength > 0 {
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = readUpTo(r.Body, auth.MaxSignedBodyBytes+1)
	}
	r.Body.Close()
	if err != nil || len(body) > auth.MaxSignedBodyBytes {
		return digest, 0, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return sha256.Sum256(body), int64(cap(body)), true
}

// limit applies the rate limits of app (or, for an anonymous caller on a
// route with AnonymousLimit, of its client address) at now. It returns the
// decision to report in the RateLimit headers (ok false: the route has no
// limit for this caller) and, on a refusal, its reason.
func (h *Handler) limit(client string, rt *Route, app *App, now time.Time) (d ratelimit.Decision, limited bool) {
	cs := h.consumers
	if app == nil {
		if rt.AnonymousLimit == (ratelimit.Policy{}) {
			return d, false
		}
		addr, ok := clientIP(client)
		if !ok {
			return d, false
		}
		return cs.anonLimits.Allow(anonKey{route: rt.Name, addr: addr}, rt.AnonymousLimit, now), true
	}
	per, hasRoute := app.RouteLimits[rt.Name]
	if hasRoute && per != (ratelimit.Policy{}) {
		d = cs.appLimits.Allow(app.routeKeys[rt.Name], per, now)
		limited = true
		if !d.Allowed {
			return d, true
		}
	}
	if app.Limit != (ratelimit.Policy{}) {
		da := cs.appLimits.Allow(app.ID, app.Limit, now)
		if !limited || !da.Allowed || da.Remaining < d.Remaining {
			d = da
		}
		limited = true
	}
	return d, limited
}

// classOf maps a status to its appCounters.byClass slot.
func classOf(status int) int {
	if status >= 100 && status < 600 {
		return status / 100
	}
	return 0
}
