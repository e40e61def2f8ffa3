package jwtauth

import (
	"bytes"
	"encoding/json"
)

// Claims kept for binding (Issuer.Claims): a data route binds a parameter
// or row filter to a claim (`from: claim.<name>`), so the verified token's
// value of that claim is kept, as text: a string as it is, a number as its
// JSON text, exactly (decoded with UseNumber, so 2^53+1 stays 2^53+1). A
// claim that is null, a boolean, an array or an object is not kept (its
// route answers 403 identity_claim_missing). The set is the route's, known
// when the configuration is loaded, so the map holds at most len(Claims)
// entries; an issuer that keeps none decodes nothing more.

// MaxClaimValue bounds a kept claim's value, in bytes; a longer one is not
// kept. (The token itself is bounded by max_token_bytes.)
const MaxClaimValue = 1024

// keptClaims decodes a verified payload and keeps the claims named in
// want. It is a destination of jwt.JSONWebToken.Claims, which calls its
// UnmarshalJSON with the payload.
type keptClaims struct {
	want []string
	got  map[string]string
}

// UnmarshalJSON keeps the wanted claims of payload b.
func (k *keptClaims) UnmarshalJSON(b []byte) error {
	k.got = KeepClaims(b, k.want)
	return nil
}

// KeepClaims returns the claims of the JSON object payload named in want
// that are strings or numbers, as text (see the file's header); nil when
// none is. A payload that is not a JSON object keeps nothing.
func KeepClaims(payload []byte, want []string) map[string]string {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(payload, &all); err != nil {
		return nil
	}
	var out map[string]string
	for _, name := range want {
		raw, ok := all[name]
		if !ok {
			continue
		}
		v, ok := claimText(raw)
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(want))
		}
		out[name] = v
	}
	return out
}

// claimText is a string claim's value or a number claim's JSON text.
func claimText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || len(raw) > MaxClaimValue+2 {
		return "", false
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil || len(s) > MaxClaimValue {
			return "", false
		}
		return s, true
	case c == '-' || (c >= '0' && c <= '9'):
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var n json.Number
		if d.Decode(&n) != nil {
			return "", false
		}
		return n.String(), true
	}
	return "", false
}
