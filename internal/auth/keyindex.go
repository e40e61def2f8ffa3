package auth

import (
	"crypto/subtle"
	"encoding/hex"
	"fmt"
)

// maxIndexEntries bounds an index built from outside data.
const maxIndexEntries = 10_000_000

// KeyEntry is one active API key of an app, as the app store keeps it.
type KeyEntry struct {
	AppID string
	// SHA256Hex is the key's SHA-256 digest in hex (64 characters).
	SHA256Hex string
}

// KeyIndex maps presented API keys to apps. It is immutable once built,
// safe for concurrent use, and meant to be rebuilt by the app store and
// swapped atomically when keys change. Revoked keys are simply not in it;
// it knows nothing of app status (a suspended app is refused by the
// caller, with 403).
//
// Authenticate hashes the presented key with SHA-256, looks the digest up
// in a map, and confirms a hit with subtle.ConstantTimeCompare on the two
// 32-byte digests. The map's lookup time may depend on the digest (its
// hash bucket, how many bytes match a stored digest), but that leaks
// nothing useful: an attacker chooses keys, not digests, and cannot steer
// SHA-256 output toward a stored digest's prefix (that would be a partial
// preimage attack), so learning "my digest shares a bucket or a prefix
// with a stored one" tells nothing about any stored key. The plaintext is
// never compared with anything.
type KeyIndex struct {
	byDigest map[[32]byte]int32
	entries  []indexed
	trace    func(step string) // tests only: records the steps taken
}

type indexed struct {
	digest [32]byte
	appID  string
}

// NewKeyIndex builds an index from entries. It refuses, naming the entry,
// a digest that is not 64 hex characters and a digest held by two apps
// (the same key twice for one app is kept once).
func NewKeyIndex(entries []KeyEntry) (*KeyIndex, error) {
	if len(entries) > maxIndexEntries {
		return nil, fmt.Errorf("auth: key index: %d entries, more than %d", len(entries), maxIndexEntries)
	}
	x := &KeyIndex{byDigest: make(map[[32]byte]int32, len(entries)), entries: make([]indexed, 0, len(entries))}
	for i, e := range entries {
		d, err := ParseDigest(e.SHA256Hex)
		if err != nil {
			return nil, fmt.Errorf("auth: key index: entry %d (app %q): %w", i, e.AppID, err)
		}
		if j, ok := x.byDigest[d]; ok {
			if x.entries[j].appID == e.AppID {
				continue
			}
			return nil, fmt.Errorf("auth: key index: entry %d (app %q): the same key is held by app %q", i, e.AppID, x.entries[j].appID)
		}
		x.byDigest[d] = int32(len(x.entries))
		x.entries = append(x.entries, indexed{digest: d, appID: e.AppID})
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

// Len returns the number of keys in the index.
func (x *KeyIndex) Len() int { return len(x.entries) }

// Authenticate returns the app holding key, or an *Error: missing_credentials
// for an empty key, unknown_key for any other key not in the index. It does
// not allocate.
func (x *KeyIndex) Authenticate(key string) (appID string, err error) {
	if key == "" {
		return "", ErrMissingCredentials
	}
	d := HashKey(key)
	x.step("hash")
	i, ok := x.byDigest[d]
	x.step("lookup")
	if !ok {
		return "", ErrUnknownKey
	}
	e := &x.entries[i]
	x.step("compare")
	if subtle.ConstantTimeCompare(d[:], e.digest[:]) != 1 {
		return "", ErrUnknownKey // unreachable: the map matched the same bytes
	}
	return e.appID, nil
}

func (x *KeyIndex) step(s string) {
	if x.trace != nil {
		x.trace(s)
	}
}
