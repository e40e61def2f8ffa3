package testsvc

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestHydra: the provider starts on loopback, issues a client-credentials
// JWT naming the client and its scopes, rotates its signing key through
// the admin API (the next token names the new kid, the JWKS holds both),
// and stops.
func TestHydra(t *testing.T) {
	h := StartHydra(t)
	h.CreateClient(t, "shop", "shop-secret-0123456789", []string{"orders"}, []string{"orders-api"})
	kid := func(tok string) string {
		b, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
		var hd struct{ Kid string }
		json.Unmarshal(b, &hd)
		return hd.Kid
	}
	tok := h.Token(t, "shop", "shop-secret-0123456789", []string{"orders"}, []string{"orders-api"})
	b, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	var c struct {
		ClientID string   `json:"client_id"`
		Scp      []string `json:"scp"`
		Iss      string   `json:"iss"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.ClientID != "shop" || len(c.Scp) != 1 || c.Iss != h.PublicURL {
		t.Fatalf("claims %s: %v", b, err)
	}
	h.RotateKey(t, "rotated-1")
	if k := kid(h.Token(t, "shop", "shop-secret-0123456789", []string{"orders"}, []string{"orders-api"})); k != "rotated-1" {
		t.Fatalf("after the rotation the token names kid %q", k)
	}
	resp, err := http.Get(h.PublicURL + ".well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	var set struct{ Keys []struct{ Kid string } }
	json.NewDecoder(resp.Body).Decode(&set)
	resp.Body.Close()
	if len(set.Keys) < 2 {
		t.Fatalf("JWKS after the rotation: %+v", set)
	}
	h.Stop()
	if _, err := http.Get(h.PublicURL + ".well-known/jwks.json"); err == nil {
		t.Fatal("the provider still answers after Stop")
	}
}
