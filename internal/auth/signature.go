package auth

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// SignatureScheme is the Authorization scheme of a signed request.
const SignatureScheme = "LEVEE-HMAC-SHA256"

// MaxSignatureHeaderLen bounds the Authorization value ParseSignatureHeader
// reads: the scheme, a key ID of up to MaxKeyIDLen, a 44-byte signature
// and room for quotes and spaces.
const MaxSignatureHeaderLen = 512

// MaxKeyIDLen is the longest key ID.
const MaxKeyIDLen = 128

// SignatureHeader is a parsed signature Authorization header.
type SignatureHeader struct {
	KeyID string
	MAC   [32]byte
}

// FormatSignatureHeader returns the Authorization value for keyID and mac:
//
//	LEVEE-HMAC-SHA256 keyId=KEYID, signature=BASE64
//
// with the MAC in standard base64 with padding (44 characters). keyID must
// be 1 to MaxKeyIDLen characters from A-Z a-z 0-9 - . _ ~.
func FormatSignatureHeader(keyID string, mac [32]byte) (string, error) {
	if err := checkKeyID(keyID); err != nil {
		return "", err
	}
	return SignatureScheme + " keyId=" + keyID + ", signature=" + base64.StdEncoding.EncodeToString(mac[:]), nil
}

// ParseSignatureHeader parses an Authorization value written by
// FormatSignatureHeader, leniently where RFC 9110 is: the scheme and the
// parameter names are case-insensitive, spaces and tabs around '=' and ','
// are allowed, values may be quoted (without escapes), and the two
// parameters may come in either order. Each must appear exactly once, and
// nothing else may. Errors are *Error with Reason malformed_credentials
// (missing_credentials for an empty value). Work: one pass over at most
// MaxSignatureHeaderLen bytes.
func ParseSignatureHeader(v string) (SignatureHeader, error) {
	var h SignatureHeader
	if v == "" {
		return h, ErrMissingCredentials
	}
	if len(v) > MaxSignatureHeaderLen {
		return h, malformed("longer than %d bytes", MaxSignatureHeaderLen)
	}
	if !hasScheme(v, SignatureScheme) {
		return h, malformed("scheme is not %s", SignatureScheme)
	}
	rest := v[len(SignatureScheme):]
	var haveKeyID, haveSig bool
	for i := 0; rest != ""; i++ { // at most len(v) iterations: each consumes bytes
		if i == 2 {
			return h, malformed("more than two parameters")
		}
		var name, value string
		var err error
		if name, value, rest, err = nextParam(rest, i == 0); err != nil {
			return h, err
		}
		switch {
		case strings.EqualFold(name, "keyId"):
			if haveKeyID {
				return h, malformed("keyId given twice")
			}
			if err := checkKeyID(value); err != nil {
				return h, err
			}
			h.KeyID, haveKeyID = value, true
		case strings.EqualFold(name, "signature"):
			if haveSig {
				return h, malformed("signature given twice")
			}
			if len(value) != 44 {
				return h, malformed("signature must be 44 base64 characters, got %d", len(value))
			}
			var mac [33]byte // DecodedLen(44) = 33, the last one unused
			if n, err := base64.StdEncoding.Strict().Decode(mac[:], []byte(value)); err != nil || n != 32 {
				return h, malformed("signature is not the base64 of 32 bytes")
			}
			copy(h.MAC[:], mac[:32])
			haveSig = true
		default:
			return h, malformed("unknown parameter %.32q", name)
		}
	}
	if !haveKeyID || !haveSig {
		return h, malformed("keyId and signature are both required")
	}
	return h, nil
}

// nextParam reads one `name=value` (value a token or a quoted string) from
// s, preceded by a ',' unless first, and returns what follows.
func nextParam(s string, first bool) (name, value, rest string, err error) {
	s = trimOWS(s)
	if !first {
		if s == "" || s[0] != ',' {
			return "", "", "", malformed("parameters must be separated by ','")
		}
		s = trimOWS(s[1:])
	}
	eq := strings.IndexByte(s, '=')
	if eq <= 0 {
		return "", "", "", malformed("parameter without a name=value")
	}
	name, s = strings.TrimRight(s[:eq], " \t"), trimOWS(s[eq+1:])
	if s != "" && s[0] == '"' {
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return "", "", "", malformed("unterminated quoted value")
		}
		value, s = s[1:1+end], s[2+end:]
	} else {
		end := strings.IndexAny(s, ", \t")
		if end < 0 {
			end = len(s)
		}
		value, s = s[:end], s[end:]
	}
	return name, value, trimOWS(s), nil
}

func trimOWS(s string) string { return strings.TrimLeft(s, " \t") }

func checkKeyID(id string) error {
	if id == "" || len(id) > MaxKeyIDLen {
		return malformed("keyId must be 1 to %d characters, got %d", MaxKeyIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return malformed("keyId has a character outside A-Z a-z 0-9 - . _ ~")
		}
	}
	return nil
}

func malformed(format string, args ...any) error {
	return fail(ReasonMalformedCredentials, "Authorization: "+fmt.Sprintf(format, args...))
}
