package auth

import (
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
)

// maxIndexEntries bounds an index built from outside data (the app store
// holds at most 10,000 apps of 16 active keys each).
const maxIndexEntries = 10_000_000

// Credential is one active API key of an app, as the app store keeps it.
type Credential struct {
	AppID string
	// KeyID names the key in logs and in signed requests (keyId=); ""
	// for a key that cannot sign.
	KeyID string
	// Digest is the key's SHA-256. It is also the key's HMAC secret: the
	// client derives it from the key it holds, and levee never holds the
	// key (docs/apps.md).
	Digest [32]byte
}

// Conflict is a credential the index refused because another app holds
// the same digest (neither app is admitted with the key) or another key
// has the same key ID (neither key signs).
type Conflict struct {
	// What is "digest" or "key id"; Key is the key ID of the refused
	// credential (never the digest).
	What, Key string
	// Apps are the two apps that claim it.
	Apps [2]string
}

func (c Conflict) String() string {
	return fmt.Sprintf("%s of key %q held by apps %q and %q", c.What, c.Key, c.Apps[0], c.Apps[1])
}

// Index is the one consumer identity index: it maps the SHA-256 digests
// of API keys, and the key IDs of signing keys, to the apps holding them.
// The app store builds it once per committed change (NewIndex) and
// publishes it in its immutable snapshot; the request path reads it
// through LookupKey and LookupSecret (it implements Secrets). Immutable
// once built, safe for concurrent use; a nil *Index holds no key.
//
// Revoked keys are simply not in it; it knows nothing of app status (a
// suspended app is refused by the caller, with 403).
//
// A digest or key ID held by two apps is ambiguous: rather than let one of
// them win (the last one built, as the request path once did), the index
// leaves it out for both and reports it (Conflicts). The store refuses the
// change that would create such a pair, so a conflict here means a
// database changed behind the store's back.
//
// LookupKey looks the digest up in a map and confirms a hit with
// subtle.ConstantTimeCompare on the two 32-byte digests. The map's lookup
// time may depend on the digest (its hash bucket, how many bytes match a
// stored digest), but that leaks nothing useful: an attacker chooses keys,
// not digests, and cannot steer SHA-256 output toward a stored digest's
// prefix (that would be a partial preimage attack), so learning "my digest
// shares a bucket or a prefix with a stored one" tells nothing about any
// stored key. The plaintext is never compared with anything.
type Index struct {
	byDigest  map[[32]byte]int32
	byKeyID   map[string]int32
	entries   []Credential
	conflicts []Conflict
	// certs maps client certificates to apps (clientcert.go; WithCerts);
	// nil: none.
	certs *certIndex
	trace func(step string) // tests only: records the steps taken
}

// NewIndex builds an index from creds in O(len(creds)). The same
// credential given twice for one app is kept once. A digest claimed by two
// apps admits neither; a key ID claimed for two different keys signs for
// neither (each key still authenticates by its digest). Both are reported
// by Conflicts, and neither depends on the order of creds. It fails only
// for more than 10,000,000 credentials.
func NewIndex(creds []Credential) (*Index, error) {
	if len(creds) > maxIndexEntries {
		return nil, fmt.Errorf("auth: identity index: %d credentials, more than %d", len(creds), maxIndexEntries)
	}
	// First pass: who claims each digest and each key ID.
	type claim struct {
		app       string
		digest    [32]byte
		ambiguous bool
	}
	digests := make(map[[32]byte]*claim, len(creds))
	keyIDs := make(map[string]*claim, len(creds))
	var conflicts []Conflict
	for _, c := range creds {
		switch d := digests[c.Digest]; {
		case d == nil:
			digests[c.Digest] = &claim{app: c.AppID}
		case d.app != c.AppID:
			d.ambiguous = true
			conflicts = append(conflicts, Conflict{What: "digest", Key: c.KeyID, Apps: [2]string{d.app, c.AppID}})
		}
		if c.KeyID == "" {
			continue
		}
		switch k := keyIDs[c.KeyID]; {
		case k == nil:
			keyIDs[c.KeyID] = &claim{app: c.AppID, digest: c.Digest}
		case k.digest != c.Digest: // one digest in two apps is the digest's conflict
			k.ambiguous = true
			conflicts = append(conflicts, Conflict{What: "key id", Key: c.KeyID, Apps: [2]string{k.app, c.AppID}})
		}
	}
	// Second pass: admit what one app alone claims.
	x := &Index{byDigest: make(map[[32]byte]int32, len(digests)), byKeyID: make(map[string]int32, len(keyIDs)),
		entries: make([]Credential, 0, len(digests)), conflicts: conflicts}
	for _, c := range creds {
		if digests[c.Digest].ambiguous {
			continue
		}
		n, done := x.byDigest[c.Digest]
		if !done {
			n = int32(len(x.entries))
			x.byDigest[c.Digest] = n
			x.entries = append(x.entries, c)
		}
		if c.KeyID != "" && !keyIDs[c.KeyID].ambiguous {
			x.byKeyID[c.KeyID] = n
		}
	}
	return x, nil
}

// ParseDigest decodes a hex SHA-256 digest (64 hex characters, either case).
func ParseDigest(s string) ([32]byte, error) {
	var d [32]byte
	if len(s) != 64 {
		return d, fmt.Errorf("sha256 digest must be 64 hex characters, got %d", len(s))
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("sha256 digest is not hex: %w", err)
	}
	return d, nil
}

// Len returns the number of keys the index admits.
func (x *Index) Len() int {
	if x == nil {
		return 0
	}
	return len(x.byDigest)
}

// Conflicts returns the credentials refused for ambiguity, in build order.
func (x *Index) Conflicts() []Conflict {
	if x == nil {
		return nil
	}
	return slices.Clone(x.conflicts)
}

// LookupKey returns the app holding the key whose SHA-256 is digest, and
// the key's ID. A hit is confirmed in constant time (see Index). It does
// not allocate.
func (x *Index) LookupKey(digest [32]byte) (appID, keyID string, ok bool) {
	if x == nil {
		return "", "", false
	}
	i, ok := x.byDigest[digest]
	x.step("lookup")
	if !ok {
		return "", "", false
	}
	e := &x.entries[i]
	x.step("compare")
	if subtle.ConstantTimeCompare(digest[:], e.Digest[:]) != 1 {
		return "", "", false // unreachable: the map matched the same bytes
	}
	return e.AppID, e.KeyID, true
}

// Authenticate returns the app holding key, or an *Error: missing_credentials
// for an empty key, unknown_key for any other key not in the index. It does
// not allocate.
func (x *Index) Authenticate(key string) (appID string, err error) {
	if key == "" {
		return "", ErrMissingCredentials
	}
	d := HashKey(key)
	x.step("hash")
	appID, _, ok := x.LookupKey(d)
	if !ok {
		return "", ErrUnknownKey
	}
	return appID, nil
}

// LookupSecret implements Secrets: the app holding the signing key keyID
// and its secret (the key's digest, shared with the index: not to be
// modified).
func (x *Index) LookupSecret(keyID string) (appID string, secret []byte, ok bool) {
	if x == nil {
		return "", nil, false
	}
	i, ok := x.byKeyID[keyID]
	if !ok {
		return "", nil, false
	}
	e := &x.entries[i]
	return e.AppID, e.Digest[:], true
}

func (x *Index) step(s string) {
	if x != nil && x.trace != nil {
		x.trace(s)
	}
}
