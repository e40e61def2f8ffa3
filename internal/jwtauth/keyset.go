package jwtauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Bounds of a key set's fetching.
const (
	// MinRefreshAge and MaxRefreshAge bound the Cache-Control max-age of
	// a JWKS answer; DefaultRefreshAge applies when it has none.
	MinRefreshAge     = time.Minute
	MaxRefreshAge     = 24 * time.Hour
	DefaultRefreshAge = time.Hour
	// DefaultMinInterval is the least time between two fetches (an
	// unknown kid or an expired set triggers one): a flood of random kids
	// costs one fetch per interval.
	DefaultMinInterval = 30 * time.Second
	// MaxDocumentBytes bounds a JWKS or discovery answer.
	MaxDocumentBytes = 1 << 20
	// MaxKeys bounds the keys kept from one JWKS.
	MaxKeys = 100
	// DefaultFetchTimeout bounds one fetch (discovery and JWKS together).
	DefaultFetchTimeout = 10 * time.Second
)

// KeySetOptions configure a KeySet.
type KeySetOptions struct {
	// JWKSURI is the key set's URL; or Discovery, the OpenID provider's
	// discovery document URL (its jwks_uri is used). One of the two.
	JWKSURI, Discovery string
	// Client makes the fetches (nil: a client of its own).
	Client *http.Client
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// StateFile, when set, receives every good key set (mode 0600) and is
	// read at Start when the first fetch fails.
	StateFile string
	// MinInterval: DefaultMinInterval when 0. FetchTimeout:
	// DefaultFetchTimeout when 0.
	MinInterval, FetchTimeout time.Duration
}

// keys is one immutable fetched key set.
type keys struct {
	byKid   map[string]*jose.JSONWebKey
	expires time.Time
}

// KeySet is an issuer's signing keys. Safe for concurrent use; Lookup
// never waits for a fetch another caller is making.
type KeySet struct {
	opts    KeySetOptions
	cur     atomic.Pointer[keys]
	fetchMu sync.Mutex // held by the one fetch in progress
	last    atomic.Int64
	fetches atomic.Uint64
	fails   atomic.Uint64
}

// NewKeySet returns a key set that holds no keys until Start or Lookup
// fetches them.
func NewKeySet(o KeySetOptions) (*KeySet, error) {
	if (o.JWKSURI == "") == (o.Discovery == "") {
		return nil, errors.New("jwtauth: exactly one of jwks_uri and discovery")
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MinInterval <= 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	return &KeySet{opts: o}, nil
}

// Start fetches the keys; when that fails it reads the state file. The
// error says why there are no keys at all (the key set still works: the
// next Lookup after MinInterval fetches again).
func (k *KeySet) Start(ctx context.Context) error {
	err := k.fetch(ctx)
	if err == nil {
		return nil
	}
	if k.opts.StateFile != "" {
		if b, rerr := os.ReadFile(k.opts.StateFile); rerr == nil {
			if ks, perr := parseJWKS(b, k.opts.Now().Add(MinRefreshAge)); perr == nil {
				k.cur.Store(ks)
				return nil
			}
		}
	}
	return err
}

// Stats are counts for metrics and tests.
func (k *KeySet) Stats() (fetches, failures uint64, keys int) {
	if c := k.cur.Load(); c != nil {
		keys = len(c.byKid)
	}
	return k.fetches.Load(), k.fails.Load(), keys
}

// Lookup returns the key named kid ("" matches a set of one key). An
// unknown kid, or a set past its expiry, triggers a fetch when none was
// tried within MinInterval and none is in progress; a failed fetch keeps
// the last good set. have is false when there is no set at all.
func (k *KeySet) Lookup(ctx context.Context, kid string) (key *jose.JSONWebKey, have bool) {
	c := k.cur.Load()
	now := k.opts.Now()
	if c != nil {
		key = c.find(kid)
		if key != nil && now.Before(c.expires) {
			return key, true
		}
	}
	if k.mayFetch(now) && k.fetchMu.TryLock() {
		// Re-checked under the lock: another caller may just have fetched.
		if k.mayFetch(now) {
			_ = k.fetchLocked(ctx)
		}
		k.fetchMu.Unlock()
		if c2 := k.cur.Load(); c2 != nil {
			c = c2
			key = c.find(kid)
		}
	}
	return key, c != nil
}

func (k *KeySet) mayFetch(now time.Time) bool {
	last := k.last.Load()
	return last == 0 || now.Sub(time.Unix(0, last)) >= k.opts.MinInterval
}

func (c *keys) find(kid string) *jose.JSONWebKey {
	if kid == "" {
		if len(c.byKid) == 1 {
			for _, v := range c.byKid {
				return v
			}
		}
		return nil
	}
	return c.byKid[kid]
}

func (k *KeySet) fetch(ctx context.Context) error {
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	return k.fetchLocked(ctx)
}

func (k *KeySet) fetchLocked(ctx context.Context) error {
	now := k.opts.Now()
	k.last.Store(now.UnixNano())
	k.fetches.Add(1)
	ctx, cancel := context.WithTimeout(ctx, k.opts.FetchTimeout)
	defer cancel()
	err := k.fetchOnce(ctx, now)
	if err != nil {
		k.fails.Add(1)
	}
	return err
}

func (k *KeySet) fetchOnce(ctx context.Context, now time.Time) error {
	uri := k.opts.JWKSURI
	if uri == "" {
		b, _, err := k.get(ctx, DiscoveryURL(k.opts.Discovery))
		if err != nil {
			return err
		}
		var doc struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(b, &doc); err != nil || doc.JWKSURI == "" {
			return errors.New("jwtauth: discovery document without jwks_uri")
		}
		uri = doc.JWKSURI
	}
	b, maxAge, err := k.get(ctx, uri)
	if err != nil {
		return err
	}
	ks, err := parseJWKS(b, now.Add(maxAge))
	if err != nil {
		return err
	}
	k.cur.Store(ks)
	if k.opts.StateFile != "" {
		if err := writeState(k.opts.StateFile, b); err != nil {
			return fmt.Errorf("jwtauth: keys fetched, state_dir not written: %w", err)
		}
	}
	return nil
}

// DiscoveryURL is the OpenID discovery document of u: u itself when it
// already ends in /.well-known/openid-configuration.
func DiscoveryURL(u string) string {
	const wk = "/.well-known/openid-configuration"
	if strings.HasSuffix(u, wk) {
		return u
	}
	return strings.TrimSuffix(u, "/") + wk
}

func (k *KeySet) get(ctx context.Context, uri string) ([]byte, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.opts.Client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("jwtauth: %s answered %d", uri, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes+1))
	if err != nil {
		return nil, 0, err
	}
	if len(b) > MaxDocumentBytes {
		return nil, 0, fmt.Errorf("jwtauth: %s: answer over %d bytes", uri, MaxDocumentBytes)
	}
	return b, MaxAge(resp.Header.Get("Cache-Control")), nil
}

// MaxAge is the max-age of a Cache-Control value bounded to
// [MinRefreshAge, MaxRefreshAge]; DefaultRefreshAge without one.
func MaxAge(cc string) time.Duration {
	for _, d := range strings.Split(cc, ",") {
		d = strings.TrimSpace(d)
		if len(d) > 8 && strings.EqualFold(d[:8], "max-age=") {
			n, err := strconv.ParseInt(strings.Trim(d[8:], `"`), 10, 64)
			if err != nil || n < 0 {
				break
			}
			age := time.Duration(min(n, int64(MaxRefreshAge/time.Second))) * time.Second
			return max(MinRefreshAge, age)
		}
	}
	return DefaultRefreshAge
}

// parseJWKS keeps the public signature keys of a JWKS (at most MaxKeys):
// private keys, encryption keys and symmetric keys are skipped.
func parseJWKS(b []byte, expires time.Time) (*keys, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("jwtauth: bad JWKS: %w", err)
	}
	ks := &keys{byKid: make(map[string]*jose.JSONWebKey), expires: expires}
	for i := range set.Keys {
		key := &set.Keys[i]
		if len(ks.byKid) == MaxKeys {
			break
		}
		if !key.Valid() || !key.IsPublic() || (key.Use != "" && key.Use != "sig") {
			continue
		}
		ks.byKid[key.KeyID] = key
	}
	if len(ks.byKid) == 0 {
		return nil, errors.New("jwtauth: JWKS holds no public signature key")
	}
	return ks, nil
}

// writeState writes b to path, mode 0600, through a rename so a reader
// never sees half a file.
func writeState(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".jwks-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
