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
	// DefaultFetchWait is the longest a request waits for a fetch its
	// unknown kid started (or found in progress). Past it the request is
	// refused key_unavailable and the fetch goes on in the background, so
	// a slow or hanging provider never holds a request for FetchTimeout.
	DefaultFetchWait = time.Second
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
	// DefaultFetchTimeout when 0. FetchWait: DefaultFetchWait when 0.
	MinInterval, FetchTimeout, FetchWait time.Duration
}

// keys is one immutable fetched key set.
type keys struct {
	byKid   map[string]*jose.JSONWebKey
	expires time.Time
}

// KeySet is an issuer's signing keys. Safe for concurrent use. At most
// one fetch runs at a time (single flight), in a goroutine of its own
// bounded by FetchTimeout; Lookup waits for it at most FetchWait.
type KeySet struct {
	opts     KeySetOptions
	cur      atomic.Pointer[keys]
	mu       sync.Mutex    // guards inflight
	inflight chan struct{} // closed when the fetch in progress ends; nil: none
	last     atomic.Int64
	fetches  atomic.Uint64
	fails    atomic.Uint64
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
	if o.FetchWait <= 0 {
		o.FetchWait = DefaultFetchWait
	}
	return &KeySet{opts: o}, nil
}

// Start fetches the keys; when that fails it reads the state file. The
// error says why there are no keys at all (the key set still works: the
// next Lookup after MinInterval fetches again).
func (k *KeySet) Start(ctx context.Context) error {
	err := k.fetchNow(ctx)
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
// unknown kid starts a fetch when none was tried within MinInterval and
// none is in progress, and waits for the fetch in progress at most
// FetchWait (or until ctx ends): past that it answers from the set it has
// and the fetch goes on in the background. A set past its expiry that
// holds kid answers at once and is refreshed in the background. A failed
// fetch keeps the last good set. have is false when there is no set at
// all, or when kid is not in it and the fetch is still in progress after
// FetchWait (Verify answers key_unavailable to both: try again later).
func (k *KeySet) Lookup(ctx context.Context, kid string) (key *jose.JSONWebKey, have bool) {
	c := k.cur.Load()
	now := k.opts.Now()
	if c != nil {
		key = c.find(kid)
		if key != nil {
			if !now.Before(c.expires) {
				k.begin(now) // stale: refresh off the request path
			}
			return key, true
		}
	}
	if done := k.begin(now); done != nil {
		t := time.NewTimer(k.opts.FetchWait)
		pending := false
		select {
		case <-done:
		case <-t.C:
			pending = true
		case <-ctx.Done():
			pending = true
		}
		t.Stop()
		if c2 := k.cur.Load(); c2 != nil {
			c = c2
			key = c.find(kid)
		}
		if key == nil && pending {
			return nil, false // not known yet: the answer is not final
		}
	}
	return key, c != nil
}

// begin returns the done channel of the fetch in progress, or starts one
// when MinInterval has passed since the last; nil when neither.
func (k *KeySet) begin(now time.Time) <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inflight != nil {
		return k.inflight
	}
	if !k.mayFetch(now) {
		return nil
	}
	done := k.claim(now)
	go func() {
		// Not the request's context: the fetch outlives the request that
		// started it. Bounded by FetchTimeout.
		_ = k.run(context.Background(), done)
	}()
	return done
}

// claim marks a fetch as in progress at now; k.mu held.
func (k *KeySet) claim(now time.Time) chan struct{} {
	k.last.Store(now.UnixNano())
	k.inflight = make(chan struct{})
	return k.inflight
}

// run makes the fetch claimed with done and ends it.
func (k *KeySet) run(ctx context.Context, done chan struct{}) error {
	err := k.fetchLocked(ctx)
	k.mu.Lock()
	k.inflight = nil
	close(done)
	k.mu.Unlock()
	return err
}

// fetchNow fetches in the caller's goroutine, after waiting (within ctx)
// for a fetch already in progress.
func (k *KeySet) fetchNow(ctx context.Context) error {
	for range 2 { // the one in progress, then ours
		k.mu.Lock()
		if k.inflight == nil {
			done := k.claim(k.opts.Now())
			k.mu.Unlock()
			return k.run(ctx, done)
		}
		wait := k.inflight
		k.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.New("jwtauth: another fetch is in progress")
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

// fetchLocked makes one fetch; the caller has claimed it (k.inflight).
func (k *KeySet) fetchLocked(ctx context.Context) error {
	now := k.opts.Now()
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
