package auth

import (
	"bytes"
	"crypto/sha256"
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

// FuzzIndex: whatever credentials it is given, in whatever order, the
// index admits a digest exactly when one app alone claims it, for that
// app; and signs with a key ID exactly when every claim of it names one
// key of one app (held by that app alone), with that key's digest as the
// secret. Each 3 bytes of the input are one credential: app, digest and
// key ID, each one of a few, so that claims collide often.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 1, 0, 1, 2, 2, 2, 2, 2})
	f.Add([]byte{0, 1, 1, 1, 2, 1, 2, 2, 2, 0, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 3*64 {
			b = b[:3*64]
		}
		var creds []Credential
		for i := 0; i+3 <= len(b); i += 3 {
			c := Credential{AppID: string(rune('a' + b[i]%4)), Digest: sha256.Sum256([]byte{b[i+1] % 8})}
			if k := b[i+2] % 9; k < 8 {
				c.KeyID = string(rune('k')) + string(rune('0'+k))
			}
			creds = append(creds, c)
		}
		x, err := NewIndex(creds)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range creds {
			apps := map[string]bool{}
			for _, o := range creds {
				if o.Digest == c.Digest {
					apps[o.AppID] = true
				}
			}
			app, _, ok := x.LookupKey(c.Digest)
			if want := len(apps) == 1; ok != want || ok && app != c.AppID {
				t.Fatalf("%v: LookupKey of %s's digest = %q, %v; claimed by %v", creds, c.AppID, app, ok, apps)
			}
			if c.KeyID == "" {
				continue
			}
			signs := len(apps) == 1
			for _, o := range creds {
				if o.KeyID == c.KeyID && o.Digest != c.Digest {
					signs = false
				}
			}
			app, secret, ok := x.LookupSecret(c.KeyID)
			if ok != signs || ok && (app != c.AppID || !bytes.Equal(secret, c.Digest[:])) {
				t.Fatalf("%v: LookupSecret(%s) = %q, %x, %v; want it to sign %v for %s", creds, c.KeyID, app, secret, ok, signs, c.AppID)
			}
		}
	})
}
