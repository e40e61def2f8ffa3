package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
)

// KeyPrefix starts every key NewKey makes, so a leaked key is recognisable
// by secret scanners and in logs.
const KeyPrefix = "lvk_"

// MaxKeyLen is the longest API key accepted (NewKey's are 47 bytes); longer
// values are malformed, which also bounds the hashing work per request.
const MaxKeyLen = 256

// HeaderAPIKey is the alternative to "Authorization: Bearer".
const HeaderAPIKey = "X-Api-Key"

// NewKey returns a new API key and the hex SHA-256 digest to store in its
// place: KeyPrefix + base64url (no padding) of 32 bytes from crypto/rand.
// Show the plaintext to its owner once; keep only the digest.
func NewKey() (plaintext, sha256hex string) {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	plaintext = KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	d := HashKey(plaintext)
	return plaintext, hex.EncodeToString(d[:])
}

// HashKey returns the SHA-256 digest of key, without allocating for keys
// up to MaxKeyLen bytes.
func HashKey(key string) [32]byte {
	var buf [MaxKeyLen]byte
	if len(key) <= MaxKeyLen {
		n := copy(buf[:], key)
		return sha256.Sum256(buf[:n])
	}
	return sha256.Sum256([]byte(key))
}

// IsSigned reports whether the request carries a LEVEE-HMAC-SHA256
// Authorization header, so the caller knows to verify a signature rather
// than look for an API key.
func IsSigned(h http.Header) bool {
	v := h.Values("Authorization")
	return len(v) == 1 && hasScheme(v[0], SignatureScheme)
}

// ExtractAPIKey returns the API key a request presents, from
// "Authorization: Bearer KEY" or "X-Api-Key: KEY". Both may be present
// only if they carry the same key. Errors (an *Error):
//   - missing_credentials: neither header;
//   - malformed_credentials: a header repeated, an Authorization scheme
//     other than Bearer, an empty key, a key longer than MaxKeyLen or with
//     characters outside the token68 set, or two different keys.
func ExtractAPIKey(h http.Header) (string, error) {
	var bearer, header string
	var hasBearer, hasHeader bool
	switch v := h.Values("Authorization"); len(v) {
	case 0:
	case 1:
		if !hasScheme(v[0], "Bearer") {
			return "", fail(ReasonMalformedCredentials, "Authorization: unsupported scheme, want Bearer")
		}
		bearer, hasBearer = strings.TrimLeft(v[0][len("Bearer"):], " "), true
		if err := checkKey("Authorization: Bearer", bearer); err != nil {
			return "", err
		}
	default:
		return "", fail(ReasonMalformedCredentials, "Authorization: more than one header")
	}
	switch v := h.Values(HeaderAPIKey); len(v) {
	case 0:
	case 1:
		header, hasHeader = strings.Trim(v[0], " \t"), true
		if err := checkKey(HeaderAPIKey, header); err != nil {
			return "", err
		}
	default:
		return "", fail(ReasonMalformedCredentials, HeaderAPIKey+": more than one header")
	}
	switch {
	case hasBearer && hasHeader && bearer != header:
		return "", fail(ReasonMalformedCredentials, "Authorization and "+HeaderAPIKey+" carry different keys")
	case hasBearer:
		return bearer, nil
	case hasHeader:
		return header, nil
	}
	return "", ErrMissingCredentials
}

// hasScheme reports whether v starts with scheme (case-insensitive, as RFC
// 9110 says) followed by a space.
func hasScheme(v, scheme string) bool {
	return len(v) > len(scheme) && v[len(scheme)] == ' ' && strings.EqualFold(v[:len(scheme)], scheme)
}

// checkKey checks a presented key's length and characters: token68 of RFC
// 9110 (letters, digits, -._~+/ and trailing =). Work: at most MaxKeyLen.
func checkKey(where, k string) error {
	if k == "" {
		return fail(ReasonMalformedCredentials, where+": empty key")
	}
	if len(k) > MaxKeyLen {
		return fail(ReasonMalformedCredentials, where+": key longer than 256 bytes")
	}
	pad := false
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '=':
			pad = true
		case pad, !isToken68(c):
			return fail(ReasonMalformedCredentials, where+": key has a character outside token68")
		}
	}
	return nil
}

func isToken68(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
}
