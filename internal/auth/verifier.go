package auth

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// DefaultSkew is how far a signed request's Date may be from now, either
// way, unless VerifierOptions.Skew says otherwise.
const DefaultSkew = 5 * time.Minute

// DefaultNonceCapacity is how many accepted signatures the replay cache
// holds unless VerifierOptions.NonceCapacity says otherwise: 100,000 covers
// 166 signed requests per second sustained over the default 10 minutes.
const DefaultNonceCapacity = 100_000

// MaxSignedBodyBytes is the largest body a signed request may have. The
// signature covers the body's SHA-256, so the proxy must read the whole
// body before forwarding: it hashes it as it buffers it (up to this cap,
// refusing a longer body with 413) and passes the digest to Verify.
const MaxSignedBodyBytes = 1 << 20

// VerifierOptions configure a Verifier; the zero value means the defaults.
type VerifierOptions struct {
	// Skew is how far the Date of a signed request may be from now, in
	// either direction, inclusive. 0 means DefaultSkew; 1s to 1h.
	Skew time.Duration
	// NonceCapacity bounds the replay cache. 0 means DefaultNonceCapacity;
	// 1 to 10,000,000. Size it above the peak signed requests per second
	// × 2 × Skew, or replays become possible (see Stats.NoncesEvicted).
	NonceCapacity int
}

// Verifier checks signed requests and refuses replays. Safe for concurrent
// use; the replay cache is its only state (one mutex, O(1) per request).
// Create it with NewVerifier; the zero Verifier is not usable.
type Verifier struct {
	skew   int64
	nonces *nonceCache
}

// NewVerifier validates o and returns a Verifier.
func NewVerifier(o VerifierOptions) (*Verifier, error) {
	var errs []error
	if o.Skew == 0 {
		o.Skew = DefaultSkew
	}
	if o.Skew < time.Second || o.Skew > time.Hour {
		errs = append(errs, fmt.Errorf("auth: skew must be from 1s to 1h, got %v", o.Skew))
	}
	if o.NonceCapacity == 0 {
		o.NonceCapacity = DefaultNonceCapacity
	}
	if o.NonceCapacity < 1 || o.NonceCapacity > 10_000_000 {
		errs = append(errs, fmt.Errorf("auth: nonce capacity must be from 1 to 10000000, got %d", o.NonceCapacity))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// A signature is valid while |now − Date| ≤ skew, so at most until
	// now + 2×skew: remembering it that long makes every replay visible.
	return &Verifier{skew: int64(o.Skew), nonces: newNonceCache(o.NonceCapacity, 2*int64(o.Skew))}, nil
}

// Secrets looks up a signing key: the app it belongs to and its secret.
// HMAC secrets cannot be stored as digests; the app store keeps them
// encrypted at rest or not at all. Index (levee's apps: the secret of a
// key is its SHA-256) and SecretIndex (secrets of the caller's choosing)
// implement it.
type Secrets interface {
	LookupSecret(keyID string) (appID string, secret []byte, ok bool)
}

// Verify authenticates a signed request and returns its app. bodySHA256 is
// the SHA-256 of the request body (of nothing for a bodiless request),
// which the caller computes while buffering it (MaxSignedBodyBytes). The
// checks, cheapest first, each with its Reason:
//
//  1. the Authorization header parses (missing_credentials without one,
//     malformed_credentials otherwise);
//  2. a single Date header in IMF-fixdate (malformed_credentials);
//  3. |now − Date| ≤ skew (stale_date);
//  4. the key ID is known (unknown_key);
//  5. the HMAC of the canonical request equals the signature, compared
//     with hmac.Equal (bad_signature; also for a query that cannot be
//     canonicalised);
//  6. the signature was not accepted before (replayed); it is then
//     remembered for 2×skew.
func (v *Verifier) Verify(r *http.Request, bodySHA256 [32]byte, secrets Secrets, now time.Time) (appID string, err error) {
	auth := r.Header.Values("Authorization")
	if len(auth) == 0 {
		return "", ErrMissingCredentials
	}
	if len(auth) > 1 {
		return "", fail(ReasonMalformedCredentials, "Authorization: more than one header")
	}
	sig, err := ParseSignatureHeader(auth[0])
	if err != nil {
		return "", err
	}
	dates := r.Header.Values("Date")
	if len(dates) != 1 {
		return "", fail(ReasonMalformedCredentials, "Date: a signed request needs exactly one Date header")
	}
	date, err := time.Parse(http.TimeFormat, dates[0])
	if err != nil {
		return "", fail(ReasonMalformedCredentials, "Date: not an IMF-fixdate (RFC 9110)")
	}
	ns := now.UnixNano()
	if d := ns - date.UnixNano(); d > v.skew || d < -v.skew {
		return "", fail(ReasonStaleDate, fmt.Sprintf("Date is %v from now, more than %v", time.Duration(d).Abs(), time.Duration(v.skew)))
	}
	appID, secret, ok := secrets.LookupSecret(sig.KeyID)
	if !ok {
		return "", ErrUnknownKey
	}
	var buf [512]byte
	canon, err := AppendCanonical(buf[:0], r.Method, r.URL.EscapedPath(), r.URL.RawQuery, dates[0], bodySHA256)
	if err != nil {
		return "", fail(ReasonBadSignature, err.Error())
	}
	want := MAC(secret, canon)
	if !hmac.Equal(want[:], sig.MAC[:]) {
		return "", ErrBadSignature
	}
	if !v.nonces.add(sig.MAC, ns) {
		return "", ErrReplayed
	}
	return appID, nil
}

// VerifierStats describes the replay cache.
type VerifierStats struct {
	// Nonces is the number of signatures remembered.
	Nonces int
	// NoncesEvicted counts signatures forgotten before they expired because
	// the cache was full; each could have been replayed. Above zero means
	// NonceCapacity is too small.
	NoncesEvicted uint64
}

// Stats returns the replay cache's size and evictions.
func (v *Verifier) Stats() VerifierStats {
	n, e := v.nonces.stats()
	return VerifierStats{Nonces: n, NoncesEvicted: e}
}

// SecretEntry is one signing key of an app.
type SecretEntry struct {
	KeyID  string
	AppID  string
	Secret []byte
}

// SecretIndex is an immutable Secrets built from entries whose secrets are
// the caller's own (levee's apps sign with their key's digest and use
// Index); safe for concurrent use.
type SecretIndex struct {
	byID map[string]SecretEntry
}

// MinSecretLen is the shortest secret accepted: 32 bytes, the HMAC-SHA256
// block's worth of entropy that makes brute force pointless.
const MinSecretLen = 32

// NewSecretIndex builds an index, refusing (naming the entry) a bad key ID,
// a key ID given twice and a secret shorter than MinSecretLen. Secrets are
// copied.
func NewSecretIndex(entries []SecretEntry) (*SecretIndex, error) {
	if len(entries) > maxIndexEntries {
		return nil, fmt.Errorf("auth: secret index: %d entries, more than %d", len(entries), maxIndexEntries)
	}
	x := &SecretIndex{byID: make(map[string]SecretEntry, len(entries))}
	for i, e := range entries {
		if err := checkKeyID(e.KeyID); err != nil {
			return nil, fmt.Errorf("auth: secret index: entry %d (app %q): %w", i, e.AppID, err)
		}
		if _, dup := x.byID[e.KeyID]; dup {
			return nil, fmt.Errorf("auth: secret index: entry %d (app %q): key ID %q given twice", i, e.AppID, e.KeyID)
		}
		if len(e.Secret) < MinSecretLen {
			return nil, fmt.Errorf("auth: secret index: entry %d (app %q, key %q): secret is %d bytes, want at least %d", i, e.AppID, e.KeyID, len(e.Secret), MinSecretLen)
		}
		e.Secret = append([]byte(nil), e.Secret...)
		x.byID[e.KeyID] = e
	}
	return x, nil
}

// LookupSecret implements Secrets.
func (x *SecretIndex) LookupSecret(keyID string) (string, []byte, bool) {
	e, ok := x.byID[keyID]
	return e.AppID, e.Secret, ok
}
