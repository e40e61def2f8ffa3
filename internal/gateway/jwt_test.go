package gateway

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// jwksServer is an identity provider's key endpoint over a real socket,
// counting its fetches; down makes it answer 503.
type jwksServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	down    bool
	fetches atomic.Int64
}

func newJWKSServer(t *testing.T, keys ...jose.JSONWebKey) *jwksServer {
	s := &jwksServer{keys: keys}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Cache-Control", "max-age=300")
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: s.keys})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

type jwtKey struct {
	kid, alg string
	key      crypto.Signer
}

func (k jwtKey) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.key.Public(), KeyID: k.kid, Algorithm: k.alg, Use: "sig"}
}

func b64url(v any) string {
	b, ok := v.([]byte)
	if !ok {
		b, _ = json.Marshal(v)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// sign makes a compact JWS by hand, so a test can put anything in it.
func (k jwtKey) sign(header, claims map[string]any) string {
	in := b64url(header) + "." + b64url(claims)
	sum := sha256.Sum256([]byte(in))
	var sig []byte
	switch pk := k.key.(type) {
	case *rsa.PrivateKey:
		sig, _ = rsa.SignPKCS1v15(rand.Reader, pk, crypto.SHA256, sum[:])
	case *ecdsa.PrivateKey:
		r, s, _ := ecdsa.Sign(rand.Reader, pk, sum[:])
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	}
	return in + "." + b64url(sig)
}

func jwtClaims(kv ...any) map[string]any {
	now := time.Now()
	m := map[string]any{"iss": "https://idp.test", "aud": "orders-api", "sub": "user-1", "azp": "shop",
		"exp": now.Add(time.Hour).Unix(), "iat": now.Add(-time.Minute).Unix(), "scope": "orders"}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	return m
}

func jwtConfig(upstream, jwks, stateDir string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
state_dir: %s
identity:
  jwt_issuers:
    corp:
      issuer: https://idp.test
      jwks_uri: %s
      audiences: [orders-api]
      algorithms: [RS256, ES256]
      scopes_claim: scope
upstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: orders, match: {path_prefix: /orders/}, upstream: data, auth: jwt}
  - {name: admin, match: {path_prefix: /admin/}, upstream: data, auth: jwt}
apps:
  - {id: shop, grants: [orders, admin]}
  - {id: other, grants: [admin]}
`, stateDir, jwks, upstream)
}

// TestJWTOverSockets: a real levee with a JWKS endpoint over a real
// socket: RS256 and ES256 tokens admitted with their app; hostile tokens
// 401 with WWW-Authenticate Bearer error="invalid_token" and their fixed
// detail; a genuine token naming an unknown app 403 unknown_app, one
// without the route among its scopes 403 no_scope, one whose app lacks
// the grant 403 no_grant; the IdP down: cached keys verify; a second
// levee started with the IdP down verifies from the state file.
func TestJWTOverSockets(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	evilK, _ := rsa.GenerateKey(rand.Reader, 2048)
	rs, es, evil := jwtKey{"r1", "RS256", rk}, jwtKey{"e1", "ES256", ek}, jwtKey{"r1", "RS256", evilK}
	idp := newJWKSServer(t, rs.public(), es.public())
	upstream := hostPort(echoBackend(t))
	state := t.TempDir()
	h := start(t, jwtConfig(upstream, idp.srv.URL, state))

	call := func(h *harness, path, tok string) (int, string, map[string]string) {
		t.Helper()
		var resp *http.Response
		if tok == "" {
			resp = h.get(path)
		} else {
			resp = h.get(path, "Authorization", "Bearer "+tok)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]string
		json.Unmarshal(raw, &m)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), m
	}
	rh := map[string]any{"alg": "RS256", "kid": "r1"}
	for _, k := range []jwtKey{rs, es} {
		code, _, body := call(h, "/orders/1", k.sign(map[string]any{"alg": k.alg, "kid": k.kid}, jwtClaims()))
		if code != 200 || body["app"] != "shop" {
			t.Fatalf("%s: %d %v", k.alg, code, body)
		}
	}
	good := rs.sign(rh, jwtClaims())
	parts := strings.Split(good, ".")
	hostile := []struct{ name, tok, detail string }{
		{"no token", "", "missing_token"},
		{"alg none", b64url(map[string]any{"alg": "none"}) + "." + parts[1] + ".", "malformed_token"},
		{"alg none signed", b64url(map[string]any{"alg": "none", "kid": "r1"}) + "." + parts[1] + "." + parts[2], "invalid_token"},
		{"jku", evil.sign(map[string]any{"alg": "RS256", "kid": "r1", "jku": "http://127.0.0.1:1/"}, jwtClaims()), "invalid_token"},
		{"embedded jwk", evil.sign(map[string]any{"alg": "RS256", "kid": "r1", "jwk": evil.public()}, jwtClaims()), "invalid_token"},
		{"kid path", evil.sign(map[string]any{"alg": "RS256", "kid": "../../etc/passwd"}, jwtClaims()), "invalid_token"},
		{"forged", evil.sign(rh, jwtClaims()), "invalid_token"},
		{"stripped signature", parts[0] + "." + parts[1] + ".", "malformed_token"},
		{"truncated signature", good[:len(good)-8], "invalid_token"},
		{"expired", rs.sign(rh, jwtClaims("exp", time.Now().Add(-time.Hour).Unix())), "token_expired"},
		{"not yet valid", rs.sign(rh, jwtClaims("nbf", time.Now().Add(time.Hour).Unix())), "token_not_yet_valid"},
		{"wrong iss", rs.sign(rh, jwtClaims("iss", "https://evil.test")), "wrong_issuer"},
		{"wrong aud", rs.sign(rh, jwtClaims("aud", "billing")), "wrong_audience"},
		{"unknown crit", rs.sign(map[string]any{"alg": "RS256", "kid": "r1", "crit": []string{"x"}, "x": 1}, jwtClaims()), "invalid_token"},
		{"over max_token_bytes", rs.sign(rh, jwtClaims("pad", strings.Repeat("x", 9000))), "token_too_large"},
	}
	for _, c := range hostile {
		code, chal, body := call(h, "/orders/1", c.tok)
		// RFC 6750 section 3.1: the answer to a request without a token
		// names no error; every other names invalid_token.
		wantChal := `Bearer realm="levee", error="invalid_token"`
		if c.tok == "" {
			wantChal = `Bearer realm="levee"`
		}
		if code != 401 || body["detail"] != c.detail || chal != wantChal {
			t.Errorf("%s: %d %q %v, want 401 %s with %q", c.name, code, chal, body, c.detail, wantChal)
		}
	}
	for _, c := range []struct{ name, path, tok, detail string }{
		{"unknown app", "/orders/1", rs.sign(rh, jwtClaims("azp", "ghost")), "unknown_app"},
		{"scope missing", "/admin/1", rs.sign(rh, jwtClaims()), "no_scope"},
		{"no grant", "/orders/1", rs.sign(rh, jwtClaims("azp", "other")), "no_grant"},
	} {
		if code, _, body := call(h, c.path, c.tok); code != 403 || body["detail"] != c.detail {
			t.Errorf("%s: %d %v, want 403 %s", c.name, code, body, c.detail)
		}
	}

	// The IdP goes down: the cached keys keep verifying.
	idp.mu.Lock()
	idp.down = true
	idp.mu.Unlock()
	for i := 0; i < 20; i++ {
		if code, _, body := call(h, "/orders/1", good); code != 200 {
			t.Fatalf("IdP down, request %d: %d %v", i, code, body)
		}
	}
	// A second levee started while the IdP is down reads the key set
	// that the first wrote (0600) from its state_dir.
	fi, err := os.Stat(filepath.Join(state, "jwks-corp.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", fi, err)
	}
	state2 := t.TempDir()
	b, _ := os.ReadFile(filepath.Join(state, "jwks-corp.json"))
	if err := os.WriteFile(filepath.Join(state2, "jwks-corp.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	before := idp.fetches.Load()
	h2 := start(t, jwtConfig(upstream, idp.srv.URL, state2))
	if idp.fetches.Load() == before {
		t.Fatal("the second levee did not try the IdP at start")
	}
	if code, _, body := call(h2, "/orders/1", good); code != 200 || body["app"] != "shop" {
		t.Fatalf("restarted with the IdP down: %d %v", code, body)
	}
	t.Logf("%d hostile tokens 401, 3 genuine ones 403, JWKS fetches: %d", len(hostile), idp.fetches.Load())
}

// TestJWTRandomKidsOneFetch: 10,000 requests with random kids through
// levee cost at most one JWKS fetch (all within one 30 s interval).
func TestJWTRandomKidsOneFetch(t *testing.T) {
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	es := jwtKey{"e1", "ES256", ek}
	idp := newJWKSServer(t, es.public())
	h := start(t, jwtConfig(hostPort(echoBackend(t)), idp.srv.URL, t.TempDir()))
	base := idp.fetches.Load()
	start := time.Now()
	for i := 0; i < 10000; i++ {
		tok := es.sign(map[string]any{"alg": "ES256", "kid": fmt.Sprintf("rnd-%d", i)}, jwtClaims())
		resp := h.get("/orders/1", "Authorization", "Bearer "+tok)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("random kid %d: %d", i, resp.StatusCode)
		}
	}
	elapsed := time.Since(start)
	got := idp.fetches.Load() - base
	// Each 30 s interval may cost one fetch: the bound follows the time
	// the loop took, on a slow machine too.
	if limit := int64(elapsed/(30*time.Second)) + 1; got > limit {
		t.Fatalf("%d JWKS fetches for 10000 random kids in %v (limit %d)", got, elapsed, limit)
	}
	t.Logf("10000 random kids in %v: %d JWKS fetches", elapsed.Round(time.Millisecond), got)
}
