package auth

import (
	"errors"
	"testing"
)

// FuzzParseSignatureHeader: the parser never panics, fails only with a
// malformed/missing *Error, and whatever it accepts formats back to a value
// it parses to the same result.
func FuzzParseSignatureHeader(f *testing.F) {
	for _, s := range []string{
		exampleAuthorization,
		`levee-hmac-sha256 signature="NMQ+ZbiJBW1S7e3ldSwgO7hXnNha/BRsm6MsRWFp+XU=" , KEYID = "a"`,
		"LEVEE-HMAC-SHA256 keyId=a,signature=",
		"LEVEE-HMAC-SHA256 keyId=a, keyId=a",
		"LEVEE-HMAC-SHA256 ",
		`LEVEE-HMAC-SHA256 keyId="a`,
		"Bearer x",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h, err := ParseSignatureHeader(v)
		if err != nil {
			if !errors.Is(err, ErrMalformedCredentials) && !errors.Is(err, ErrMissingCredentials) {
				t.Fatalf("%q: unexpected error %v", v, err)
			}
			return
		}
		s, err := FormatSignatureHeader(h.KeyID, h.MAC)
		if err != nil {
			t.Fatalf("%q parsed to a key ID Format refuses: %v", v, err)
		}
		if h2, err := ParseSignatureHeader(s); err != nil || h2 != h {
			t.Fatalf("%q: round trip %q gave %+v, %v", v, s, h2, err)
		}
	})
}

func TestParseSignatureHeader(t *testing.T) {
	good := map[string]string{
		"canonical":        exampleAuthorization,
		"reordered quoted": `levee-hmac-sha256 signature="NMQ+ZbiJBW1S7e3ldSwgO7hXnNha/BRsm6MsRWFp+XU=",keyid="app-7.k1"`,
		"spaces":           "LEVEE-HMAC-SHA256   keyId = app-7.k1 ,\tsignature = NMQ+ZbiJBW1S7e3ldSwgO7hXnNha/BRsm6MsRWFp+XU=  ",
	}
	for name, v := range good {
		h, err := ParseSignatureHeader(v)
		if err != nil || h.KeyID != exampleKeyID {
			t.Errorf("%s: %+v, %v", name, h, err)
		}
	}
	sig := "signature=NMQ+ZbiJBW1S7e3ldSwgO7hXnNha/BRsm6MsRWFp+XU="
	bad := map[string]string{
		"other scheme":     "Bearer x",
		"no params":        "LEVEE-HMAC-SHA256 ",
		"no signature":     "LEVEE-HMAC-SHA256 keyId=a",
		"no key id":        "LEVEE-HMAC-SHA256 " + sig,
		"key id twice":     "LEVEE-HMAC-SHA256 keyId=a, keyId=a",
		"three params":     "LEVEE-HMAC-SHA256 keyId=a, " + sig + ", x=y",
		"unknown param":    "LEVEE-HMAC-SHA256 keyId=a, sig=x",
		"no comma":         "LEVEE-HMAC-SHA256 keyId=a " + sig,
		"short signature":  "LEVEE-HMAC-SHA256 keyId=a, signature=AAAA",
		"not base64":       "LEVEE-HMAC-SHA256 keyId=a, signature=NMQ*ZbiJBW1S7e3ldSwgO7hXnNha/BRsm6MsRWFp+XU=",
		"non-zero padding": "LEVEE-HMAC-SHA256 keyId=a, signature=NMQ+ZbiJBW1S7e3ldSwgO7hXnNha/BRsm6MsRWFp+XV=",
		"bad key id":       "LEVEE-HMAC-SHA256 keyId=a/b, " + sig,
		"unterminated":     `LEVEE-HMAC-SHA256 keyId="a, ` + sig,
		"too long":         "LEVEE-HMAC-SHA256 keyId=" + string(make([]byte, 600)),
	}
	for name, v := range bad {
		if _, err := ParseSignatureHeader(v); !errors.Is(err, ErrMalformedCredentials) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
