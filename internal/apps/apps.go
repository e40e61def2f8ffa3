// Package apps holds levee's consumer apps: who may call which routes, with
// which credentials and under which limits. It owns the app model and its
// validation, the persistent store (an embedded SQLite database under the
// state directory) and the immutable Snapshot that the request path reads.
//
// The request path never queries SQLite: every committed change rebuilds a
// *Snapshot, published with an atomic pointer (Store.Current), and the
// store calls Options.OnChange with it. Admin API writes go to the store;
// the configuration file seeds it (Store.Seed) under the precedence rule in
// docs/apps.md. It imports only the leaves limits (the bounds) and auth
// (the identity index each snapshot carries).
package apps

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/levee-gw/levee/internal/limits"
)

// Status is whether an app may call levee at all.
type Status string

// The statuses of an app.
const (
	// StatusActive apps are admitted when their key is valid.
	StatusActive Status = "active"
	// StatusSuspended apps are refused whatever their keys.
	StatusSuspended Status = "suspended"
)

// Sources of an app or a key: where it was first defined.
const (
	SourceFile = "file" // the configuration file (`apps:`)
	SourceAPI  = "api"  // the admin API
)

// Bounds on what one app and the whole store may hold. They keep the
// snapshot's size and the cost of rebuilding it bounded. Those the file's
// validation (internal/config) and the request path (internal/ratelimit)
// apply too are package limits', defined there once.
const (
	// MaxApps caps the apps in the store (file and API together).
	MaxApps = limits.MaxApps
	// MaxActiveKeys caps an app's keys that are not revoked.
	MaxActiveKeys = limits.MaxKeys
	// MaxRevokedKeys caps the revoked keys kept per app for the record;
	// revoking one more drops the oldest revoked key.
	MaxRevokedKeys = 16
	// MaxGrants caps the routes one app may be granted, and the entries
	// of its RouteLimits.
	MaxGrants = limits.MaxGrants
	// MaxNameLen caps App.Name, in bytes.
	MaxNameLen = limits.MaxAppNameLen
	// MaxConcurrency caps Limits.MaxConcurrency.
	MaxConcurrency = limits.MaxConcurrency
	// MaxPageSize caps the apps one List call returns;
	// DefaultPageSize is used when the caller asks for 0.
	MaxPageSize     = 1000
	DefaultPageSize = 100
)

// Limits are an app's own limits across every route (`limits`). The zero
// value means no limit of any kind.
type Limits struct {
	// Rate is the sustained rate, in requests per second, fractions
	// allowed; 0 means no rate limit.
	Rate float64 `json:"rate,omitempty"`
	// Burst is how many requests may arrive at once above Rate (a token
	// bucket's size). 0 with a Rate is filled in as max(1, ceil(Rate));
	// with no Rate it must be 0.
	Burst int `json:"burst,omitempty"`
	// Quota, when not nil, caps the requests per fixed period.
	Quota *Quota `json:"quota,omitempty"`
	// MaxConcurrency caps the app's requests in flight; 0 means no cap.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
}

// RouteLimit overrides an app's rate and quota on one route. The zero
// value means the route adds no limit of its own.
type RouteLimit struct {
	Rate  float64 `json:"rate,omitempty"`
	Burst int     `json:"burst,omitempty"`
	Quota *Quota  `json:"quota,omitempty"`
}

// Quota caps the requests an app may make in each period of Per.
type Quota struct {
	// Requests, Rows and Bytes per period, each 0 for not counted, at
	// least one set (rows and bytes of answers, counted as they stream).
	Requests int64    `json:"requests,omitempty"`
	Rows     int64    `json:"rows,omitempty"`
	Bytes    int64    `json:"bytes,omitempty"`
	Per      Duration `json:"per"`
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("24h", "90s").
type Duration time.Duration

// MarshalJSON writes d as a string such as "24h0m0s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string; numbers are refused, so that the
// unit is never guessed.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf(`a duration must be a string such as "24h", got %s`, truncate(string(b)))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf(`a duration must be a string such as "24h", got %q`, truncate(s))
	}
	*d = Duration(v)
	return nil
}

// Spec is what defines an app, as the admin API creates it and the file
// seeds it: everything but keys and bookkeeping.
type Spec struct {
	ID          string                `json:"id"`
	Name        string                `json:"name,omitempty"`   // default ID
	Status      Status                `json:"status,omitempty"` // default active
	Grants      []string              `json:"grants,omitempty"`
	Limits      Limits                `json:"limits,omitzero"`
	RouteLimits map[string]RouteLimit `json:"route_limits,omitempty"`
}

// FileApp is one app as the configuration file defines it: a Spec and the
// SHA-256 hashes (64 hex digits) of its API keys.
type FileApp struct {
	Spec
	KeySHA256 []string
}

// Patch changes some of an app's fields; a nil field is left as it is.
// A non-nil field replaces the whole value (Limits replaces every limit).
type Patch struct {
	Name        *string                `json:"name"`
	Status      *Status                `json:"status"`
	Grants      *[]string              `json:"grants"`
	Limits      *Limits                `json:"limits"`
	RouteLimits *map[string]RouteLimit `json:"route_limits"`
}

// Key is one API key of an app. The plaintext is never stored: only its
// SHA-256, from which ID is derived.
type Key struct {
	// ID is the first 12 hex digits of the key's SHA-256: stable, unique
	// within the app, and not secret.
	ID string `json:"id"`
	// Prefix is "lvk_" and the first 4 characters of a key created by
	// the admin API (24 of its 256 random bits), to recognise it; empty
	// for keys from the file, whose plaintext levee never saw.
	Prefix string `json:"prefix,omitempty"`
	// SHA256 is the hex SHA-256 of the plaintext key. The admin API does
	// not show it.
	SHA256  string    `json:"-"`
	Source  string    `json:"source"`
	Created time.Time `json:"created"`
	// Revoked is when the key was revoked; zero while it is active.
	Revoked time.Time `json:"revoked,omitzero"`
}

// Active reports whether k is not revoked.
func (k Key) Active() bool { return k.Revoked.IsZero() }

// App is one consumer app. Apps returned by the store and held in a
// Snapshot are shared and must not be modified.
type App struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	Keys   []Key  `json:"keys"` // oldest first
	// Passwords are the app's basic-auth passwords (passwords.go), oldest
	// first; the basic-auth user name is the app's id.
	Passwords []Password `json:"passwords"`
	// Certificates map verified client certificates to the app
	// (certs.go, auth: client_cert), oldest first.
	Certificates []Certificate         `json:"certificates"`
	Grants       []string              `json:"grants"` // sorted route names
	Limits       Limits                `json:"limits"`
	RouteLimits  map[string]RouteLimit `json:"route_limits"`
	// Source is where the app was first defined: SourceFile or SourceAPI.
	Source string `json:"source"`
	// Overridden is true for a file app changed through the admin API
	// since the file last seeded it: the file no longer overwrites it.
	Overridden bool `json:"overridden"`
	// PendingFileChange is true when the file's current definition of
	// the app differs from the one last seeded but was not applied,
	// because the app is Overridden or was created through the API.
	PendingFileChange bool      `json:"pending_file_change"`
	Created           time.Time `json:"created"`
	Updated           time.Time `json:"updated"`
}

// Active reports whether the app may call levee.
func (a *App) Active() bool { return a.Status == StatusActive }

// Granted reports whether the app may call route.
func (a *App) Granted(route string) bool {
	_, ok := slices.BinarySearch(a.Grants, route)
	return ok
}

// Errors the store returns; the admin API maps each to one status.
var (
	// ErrNotFound: no app (or key) with that id. HTTP 404.
	ErrNotFound = errors.New("not found")
	// ErrExists: an app with that id exists already. HTTP 409.
	ErrExists = errors.New("already exists")
	// ErrConflict: the request contradicts the app's state (a key
	// already revoked, too many keys, the store full). HTTP 409.
	ErrConflict = errors.New("conflict")
)

// ValidationError is a value the model refuses, naming the field. The
// admin API answers it 422.
type ValidationError struct {
	Field   string // JSON path, as "limits.rate" or "grants[2]"
	Message string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// ValidID reports whether s is a valid app id: 1 to 64 characters from
// a-z, 0-9, "_", "." and "-" (the rule of route and upstream names).
func ValidID(s string) bool { return limits.ValidID(s) }

const idRule = limits.IDRule

// Normalize fills in the defaults of s (Name, Status, Burst) and sorts its
// grants. It does not validate. It writes only to s and to copies of its
// map and slice: a Spec copied from the file's (fileDefinition) shares
// them, and the gateway's seed and the cluster store's re-seed normalise
// such copies at the same time.
func (s *Spec) Normalize() {
	if s.Name == "" {
		s.Name = s.ID
	}
	if s.Status == "" {
		s.Status = StatusActive
	}
	s.Limits.Burst = defaultBurst(s.Limits.Rate, s.Limits.Burst)
	s.RouteLimits = maps.Clone(s.RouteLimits)
	for r, l := range s.RouteLimits {
		l.Burst = defaultBurst(l.Rate, l.Burst)
		s.RouteLimits[r] = l
	}
	s.Grants = slices.Clone(s.Grants)
	slices.Sort(s.Grants)
}

func defaultBurst(rate float64, burst int) int {
	if burst == 0 && limits.CheckRate(rate) == "" {
		return int(limits.DefaultBurst(rate))
	}
	return burst
}

// Validate checks a normalised spec and returns the first problem as a
// *ValidationError, or nil.
func (s *Spec) Validate() error {
	if !ValidID(s.ID) {
		return invalid("id", "%s, got %s", idRule, quote(s.ID))
	}
	if err := validName(s.Name); err != nil {
		return err
	}
	if s.Status != StatusActive && s.Status != StatusSuspended {
		return invalid("status", `must be "active" or "suspended", got %s`, quote(string(s.Status)))
	}
	if err := validGrants(s.Grants); err != nil {
		return err
	}
	if err := s.Limits.validate("limits"); err != nil {
		return err
	}
	return validRouteLimits(s.RouteLimits, s.Grants)
}

func validName(name string) error {
	if p := limits.CheckAppName(name); p != "" {
		return invalid("name", "%s, got %s", p, quote(name))
	}
	return nil
}

// validGrants checks sorted grants: route names, distinct, at most
// MaxGrants.
func validGrants(grants []string) error {
	if len(grants) > MaxGrants {
		return invalid("grants", "at most %d routes, got %d", MaxGrants, len(grants))
	}
	for i, g := range grants {
		if !ValidID(g) {
			return invalid(fmt.Sprintf("grants[%d]", i), "a route name %s, got %s", idRule, quote(g))
		}
		if i > 0 && grants[i-1] == g {
			return invalid(fmt.Sprintf("grants[%d]", i), "duplicate route %s", quote(g))
		}
	}
	return nil
}

func validRouteLimits(rl map[string]RouteLimit, grants []string) error {
	if len(rl) > MaxGrants {
		return invalid("route_limits", "at most %d routes, got %d", MaxGrants, len(rl))
	}
	for _, r := range slices.Sorted(maps.Keys(rl)) {
		path := "route_limits." + r
		if !ValidID(r) {
			return invalid("route_limits", "key must be a route name, got %s", quote(r))
		}
		if _, ok := slices.BinarySearch(grants, r); !ok {
			return invalid(path, "route %s is not in grants", quote(r))
		}
		l := rl[r]
		if err := validRate(path, l.Rate, l.Burst, l.Quota); err != nil {
			return err
		}
	}
	return nil
}

func (l Limits) validate(path string) error {
	if err := validRate(path, l.Rate, l.Burst, l.Quota); err != nil {
		return err
	}
	if l.MaxConcurrency != 0 {
		if p := limits.CheckConcurrency(int64(l.MaxConcurrency)); p != "" {
			return invalid(path+".max_concurrency", "%s (or 0 for no cap)", p)
		}
	}
	return nil
}

// validRate checks a normalised rate, burst and quota with the bounds the
// file's validation and the request path's rate limiter apply (package
// limits): rate 0 means none, and then burst must be 0 too.
func validRate(path string, rate float64, burst int, q *Quota) error {
	if rate != 0 {
		if p := limits.CheckRate(rate); p != "" {
			return invalid(path+".rate", "%s (or 0 for no rate limit)", p)
		}
		if p := limits.CheckBurst(rate, int64(burst)); p != "" {
			return invalid(path+".burst", "%s", p)
		}
	} else if burst != 0 {
		return invalid(path+".burst", "needs a rate")
	}
	if q != nil {
		if q.Requests == 0 && q.Rows == 0 && q.Bytes == 0 {
			return invalid(path+".quota", "needs at least one of requests, rows and bytes")
		}
		if p := limits.CheckQuotaRequests(q.Requests); q.Requests != 0 && p != "" {
			return invalid(path+".quota.requests", "%s", p)
		}
		if p := limits.CheckQuotaRows(q.Rows); q.Rows != 0 && p != "" {
			return invalid(path+".quota.rows", "%s", p)
		}
		if p := limits.CheckQuotaBytes(q.Bytes); q.Bytes != 0 && p != "" {
			return invalid(path+".quota.bytes", "%s", p)
		}
		if p := limits.CheckQuotaPer(time.Duration(q.Per)); p != "" {
			return invalid(path+".quota.per", "%s", p)
		}
	}
	return nil
}

// ValidKeySHA256 reports whether s is a SHA-256 in lower-case hex.
func ValidKeySHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// quote returns s quoted, cut to 64 bytes, for error messages.
func quote(s string) string { return strconv.Quote(truncate(s)) }

func truncate(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
