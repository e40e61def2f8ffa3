package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// MaxQueryParams bounds the query parameters of a signed request: the work
// of canonicalising a query is O(p log p) in their number.
const MaxQueryParams = 256

// AppendCanonical appends to dst the string a request's signature covers:
//
//	METHOD "\n" PATH "\n" QUERY "\n" DATE "\n" hex(SHA-256(body))
//
// METHOD is the method as sent (case kept; "" means GET). PATH is the
// escaped path as sent (url.URL.EscapedPath; "" means "/"), not decoded
// and re-encoded, so the signer and the verifier need not agree on an
// encoding. QUERY is the raw query split at '&' (empty parts dropped),
// each part split at its first '=' (a missing '=' means an empty value),
// names and values decoded (url.QueryUnescape: %XX and '+' for space) and
// re-encoded with every byte outside A-Z a-z 0-9 - . _ ~ as %XX (upper-case
// hex), then sorted by name and then value, joined as name=value with '&'.
// DATE is the Date header's value as sent. The body digest is lower-case
// hex, of the empty string for a request without a body.
//
// It fails on a query with more than MaxQueryParams parts or a bad
// percent-encoding.
func AppendCanonical(dst []byte, method, escapedPath, rawQuery, date string, bodySHA256 [32]byte) ([]byte, error) {
	if method == "" {
		method = "GET"
	}
	if escapedPath == "" {
		escapedPath = "/"
	}
	dst = append(dst, method...)
	dst = append(dst, '\n')
	dst = append(dst, escapedPath...)
	dst = append(dst, '\n')
	dst, err := appendCanonicalQuery(dst, rawQuery)
	if err != nil {
		return dst, err
	}
	dst = append(dst, '\n')
	dst = append(dst, date...)
	dst = append(dst, '\n')
	return hex.AppendEncode(dst, bodySHA256[:]), nil
}

type param struct{ name, value string }

func appendCanonicalQuery(dst []byte, raw string) ([]byte, error) {
	if raw == "" {
		return dst, nil
	}
	var stack [16]param
	params := stack[:0]
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		if len(params) == MaxQueryParams {
			return dst, fmt.Errorf("query has more than %d parameters", MaxQueryParams)
		}
		name, value, _ := strings.Cut(part, "=")
		n, err := url.QueryUnescape(name)
		if err != nil {
			return dst, fmt.Errorf("query parameter %d: name: %w", len(params)+1, err)
		}
		v, err := url.QueryUnescape(value)
		if err != nil {
			return dst, fmt.Errorf("query parameter %d (%q): value: %w", len(params)+1, n, err)
		}
		params = append(params, param{n, v})
	}
	slices.SortFunc(params, func(a, b param) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return strings.Compare(a.value, b.value)
	})
	for i, p := range params {
		if i > 0 {
			dst = append(dst, '&')
		}
		dst = appendEscaped(dst, p.name)
		dst = append(dst, '=')
		dst = appendEscaped(dst, p.value)
	}
	return dst, nil
}

// appendEscaped percent-encodes every byte of s outside RFC 3986's
// unreserved set.
func appendEscaped(dst []byte, s string) []byte {
	const upperHex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
	}
	return dst
}

// MAC returns HMAC-SHA256(secret, canonical).
func MAC(secret, canonical []byte) [32]byte {
	m := hmac.New(sha256.New, secret)
	m.Write(canonical)
	var out [32]byte
	m.Sum(out[:0])
	return out
}
