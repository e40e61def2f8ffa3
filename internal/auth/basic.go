package auth

// Basic auth (RFC 7617) against passwords kept as argon2id digests.
//
// Verifying a password costs an argon2id run (about 19 MiB and tens of
// milliseconds), so BasicGuard bounds what a caller can make levee spend:
//   - a cache of recent successes keyed by HMAC-SHA256(per-process secret,
//     user NUL password): a repeat of a verified pair costs one HMAC; an
//     entry names the password (its id) it matched, and the caller checks
//     that password is still active, so a revoked or changed password
//     stops matching at once;
//   - a per-address failure limit: past MaxFailures failures in a
//     FailureWindow, an address is refused without any argon2 run;
//   - a semaphore: at most Concurrency argon2 runs at once, so a flood
//     cannot take every CPU; a request that cannot get a slot within its
//     deadline fails.
//
// The argon2id implementation is golang.org/x/crypto/argon2, the Go
// team's own (the standard library has none).

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
)

// ReasonBadPassword: a well-formed basic credential whose user is no
// active app or whose password matches none of the app's.
const ReasonBadPassword Reason = "bad_password"

// ErrBadPassword is the sentinel of ReasonBadPassword.
var ErrBadPassword = &Error{Reason: ReasonBadPassword}

// MaxBasicCredentials bounds the base64 text of a Basic credential (the
// decoded user and password are at most 3/4 of it).
const MaxBasicCredentials = 512

// ParseBasic reads the one Authorization header of h as
// "Basic base64(user:password)": the scheme case-insensitive, the
// credential standard base64 with padding, strictly decoded, at most
// MaxBasicCredentials characters; the decoded text holds exactly one
// colon, a non-empty user and password, and no control byte.
func ParseBasic(h http.Header) (user, password string, err error) {
	v := h["Authorization"]
	switch {
	case len(v) == 0:
		return "", "", ErrMissingCredentials
	case len(v) > 1:
		return "", "", fail(ReasonMalformedCredentials, "several Authorization headers")
	}
	return ParseBasicValue(v[0])
}

// ParseBasicValue is ParseBasic on one header value.
func ParseBasicValue(s string) (user, password string, err error) {
	const scheme = "basic "
	if len(s) < len(scheme) || !strings.EqualFold(s[:len(scheme)], scheme) {
		return "", "", fail(ReasonMalformedCredentials, "not a Basic credential")
	}
	cred := s[len(scheme):]
	if len(cred) == 0 || len(cred) > MaxBasicCredentials {
		return "", "", fail(ReasonMalformedCredentials, "credential empty or too long")
	}
	// Go's decoder skips CR and LF anywhere in its input, so "Y\nTpi"
	// would decode as "a:b": only the 65 characters of RFC 4648's
	// alphabet are a credential (the fuzzer found this).
	if strings.IndexFunc(cred, notBase64) >= 0 {
		return "", "", fail(ReasonMalformedCredentials, "credential not standard base64")
	}
	var buf [MaxBasicCredentials]byte
	n, derr := base64.StdEncoding.Strict().Decode(buf[:], []byte(cred))
	if derr != nil || n != base64.StdEncoding.DecodedLen(len(cred))-padding(cred) {
		return "", "", fail(ReasonMalformedCredentials, "credential not standard base64")
	}
	b := buf[:n]
	colon := -1
	for i, c := range b {
		if c < 0x20 || c == 0x7f {
			return "", "", fail(ReasonMalformedCredentials, "control byte in credential")
		}
		if c == ':' {
			if colon >= 0 {
				return "", "", fail(ReasonMalformedCredentials, "more than one colon")
			}
			colon = i
		}
	}
	if colon <= 0 || colon == len(b)-1 {
		return "", "", fail(ReasonMalformedCredentials, "empty user or password")
	}
	return string(b[:colon]), string(b[colon+1:]), nil
}

// notBase64 reports a rune outside the standard base64 alphabet and '='.
func notBase64(r rune) bool {
	return !('A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '+' || r == '/' || r == '=')
}

func padding(s string) int { return len(s) - len(strings.TrimRight(s, "=")) }

// The argon2id parameters of new digests (RFC 9106's second recommended
// option, lowered to OWASP's 19 MiB, 2 passes: about 20 to 60 ms here).
const (
	argonMemory  = 19 * 1024 // KiB
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// Bounds a stored digest's parameters must keep, so a corrupt or hostile
// row cannot make one verification cost more than this.
const (
	maxArgonMemory  = 256 * 1024 // KiB
	maxArgonTime    = 10
	maxArgonThreads = 16
)

// HashPassword returns the PHC-format argon2id digest of password:
// "$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>" (unpadded standard
// base64), the parameters in the string so they can change later.
func HashPassword(password string) (string, error) {
	var salt [argonSaltLen]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return "", err
	}
	sum := argon2.IDKey([]byte(password), salt[:], argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt[:]), base64.RawStdEncoding.EncodeToString(sum)), nil
}

// PasswordDigest is a parsed argon2id digest.
type PasswordDigest struct {
	memory     uint32
	time       uint32
	threads    uint8
	salt, hash []byte
}

// ParsePasswordDigest parses a HashPassword digest, refusing parameters
// beyond the bounds.
func ParsePasswordDigest(s string) (PasswordDigest, error) {
	var d PasswordDigest
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return d, errors.New("not an argon2id digest ($argon2id$v=19$m=...,t=...,p=...$salt$hash)")
	}
	var m, t, p uint32
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || fmt.Sprintf("m=%d,t=%d,p=%d", m, t, p) != parts[3] {
		return d, fmt.Errorf("bad argon2id parameters %q", parts[3])
	}
	if m < 8*p || m > maxArgonMemory || t < 1 || t > maxArgonTime || p < 1 || p > maxArgonThreads {
		return d, fmt.Errorf("argon2id parameters %q out of bounds (m <= %d, t <= %d, p <= %d)", parts[3], maxArgonMemory, maxArgonTime, maxArgonThreads)
	}
	salt, err1 := base64.RawStdEncoding.Strict().DecodeString(parts[4])
	hash, err2 := base64.RawStdEncoding.Strict().DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(hash) < 16 || len(hash) > 64 {
		return d, errors.New("bad argon2id salt or hash")
	}
	return PasswordDigest{memory: m, time: t, threads: uint8(p), salt: salt, hash: hash}, nil
}

// Matches runs argon2id over password and compares in constant time.
func (d PasswordDigest) Matches(password string) bool {
	if len(d.hash) == 0 {
		return false
	}
	sum := argon2.IDKey([]byte(password), d.salt, d.time, d.memory, d.threads, uint32(len(d.hash)))
	return subtle.ConstantTimeCompare(sum, d.hash) == 1
}

// StoredPassword is one active password of an app, as the guard checks it.
type StoredPassword struct {
	ID     string
	Digest PasswordDigest
}

// BasicOptions tune a BasicGuard; zero fields take the defaults.
type BasicOptions struct {
	// CacheEntries bounds the success cache (default 10,000); CacheTTL is
	// how long a success is remembered (default 5 minutes).
	CacheEntries int
	CacheTTL     time.Duration
	// MaxFailures failures from one address within FailureWindow (default
	// 10 per minute) block it until the window ends; FailureAddresses
	// bounds the addresses tracked (default 65,536).
	MaxFailures      int
	FailureWindow    time.Duration
	FailureAddresses int
	// Concurrency bounds the argon2 runs at once (default 1: one core).
	Concurrency int
}

type cacheEntry struct {
	app, password string
	expires       time.Time
}

type failWindow struct {
	start time.Time
	n     int
}

// BasicGuard verifies basic credentials with bounded cost. Safe for
// concurrent use; one per process.
type BasicGuard struct {
	o      BasicOptions
	secret [32]byte
	sem    chan struct{}

	mu    sync.Mutex
	cache map[[32]byte]cacheEntry
	fails map[netip.Addr]*failWindow
}

// NewBasicGuard returns a guard with a fresh per-process secret.
func NewBasicGuard(o BasicOptions) (*BasicGuard, error) {
	if o.CacheEntries <= 0 {
		o.CacheEntries = 10000
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = 5 * time.Minute
	}
	if o.MaxFailures <= 0 {
		o.MaxFailures = 10
	}
	if o.FailureWindow <= 0 {
		o.FailureWindow = time.Minute
	}
	if o.FailureAddresses <= 0 {
		o.FailureAddresses = 1 << 16
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	g := &BasicGuard{o: o, sem: make(chan struct{}, o.Concurrency),
		cache: make(map[[32]byte]cacheEntry), fails: make(map[netip.Addr]*failWindow)}
	if _, err := rand.Read(g.secret[:]); err != nil {
		return nil, err
	}
	return g, nil
}

// Blocked reports whether addr is over its failure limit at now, and
// until when.
func (g *BasicGuard) Blocked(addr netip.Addr, now time.Time) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.fails[addr]
	if f == nil || now.Sub(f.start) >= g.o.FailureWindow {
		return time.Time{}, false
	}
	return f.start.Add(g.o.FailureWindow), f.n >= g.o.MaxFailures
}

// Failed counts a failure of addr at now.
func (g *BasicGuard) Failed(addr netip.Addr, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.fails[addr]
	if f == nil {
		if len(g.fails) >= g.o.FailureAddresses {
			g.evictFailsLocked(now)
		}
		f = &failWindow{start: now}
		g.fails[addr] = f
	} else if now.Sub(f.start) >= g.o.FailureWindow {
		*f = failWindow{start: now}
	}
	f.n++
}

// evictFailsLocked drops ended windows, scanning at most 1,024 entries;
// when none had ended, one arbitrary entry (the map's order) goes.
func (g *BasicGuard) evictFailsLocked(now time.Time) {
	scanned, dropped := 0, 0
	var any netip.Addr
	for a, f := range g.fails {
		if now.Sub(f.start) >= g.o.FailureWindow {
			delete(g.fails, a)
			dropped++
		}
		any = a
		if scanned++; scanned >= 1024 {
			break
		}
	}
	if dropped == 0 {
		delete(g.fails, any)
	}
}

// cacheKey is HMAC-SHA256(secret, user NUL password).
func (g *BasicGuard) cacheKey(user, password string) [32]byte {
	m := hmac.New(sha256.New, g.secret[:])
	m.Write([]byte(user))
	m.Write([]byte{0})
	m.Write([]byte(password))
	var k [32]byte
	m.Sum(k[:0])
	return k
}

// Verify checks user:password against the app's active passwords
// (passwords, at most a handful). active tells whether a cached password
// id is still one of them. It returns the id of the matching password,
// or ErrBadPassword; a context ended while waiting for an argon2 slot
// fails the same way. It does not count failures: the caller does, by
// address (Failed), after Blocked said the address may try.
func (g *BasicGuard) Verify(ctx context.Context, user, password string, passwords []StoredPassword, now time.Time) (string, error) {
	k := g.cacheKey(user, password)
	g.mu.Lock()
	e, ok := g.cache[k]
	g.mu.Unlock()
	if ok && now.Before(e.expires) && e.app == user {
		for _, p := range passwords {
			if p.ID == e.password {
				return p.ID, nil
			}
		}
	}
	for _, p := range passwords {
		select {
		case g.sem <- struct{}{}:
		case <-ctx.Done():
			return "", fail(ReasonBadPassword, "no argon2 slot before the deadline")
		}
		match := p.Digest.Matches(password)
		<-g.sem
		if match {
			g.remember(k, cacheEntry{app: user, password: p.ID, expires: now.Add(g.o.CacheTTL)}, now)
			return p.ID, nil
		}
	}
	return "", ErrBadPassword
}

// remember adds a success, evicting expired entries (a bounded scan) or
// an arbitrary one when the cache is full.
func (g *BasicGuard) remember(k [32]byte, e cacheEntry, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.cache[k]; !ok && len(g.cache) >= g.o.CacheEntries {
		scanned, dropped := 0, 0
		var any [32]byte
		for key, old := range g.cache {
			if !now.Before(old.expires) {
				delete(g.cache, key)
				dropped++
			}
			any = key
			if scanned++; scanned >= 1024 {
				break
			}
		}
		if dropped == 0 {
			delete(g.cache, any)
		}
	}
	g.cache[k] = e
}

// CacheLen returns the entries in the success cache (tests, metrics).
func (g *BasicGuard) CacheLen() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.cache)
}
