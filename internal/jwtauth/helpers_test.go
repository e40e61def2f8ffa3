package jwtauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// idp is a JWKS endpoint over a real socket (httptest.Server on
// loopback) whose keys a test changes, counting the fetches it answers.
type idp struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	down    bool
	maxAge  string
	fetches atomic.Int64
}

func newIDP(t testing.TB, keys ...jose.JSONWebKey) *idp {
	p := &idp{keys: keys, maxAge: "max-age=300"}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			json.NewEncoder(w).Encode(map[string]string{"issuer": p.srv.URL, "jwks_uri": p.srv.URL + "/jwks"})
		case "/jwks":
			p.fetches.Add(1)
			if p.down {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Cache-Control", p.maxAge)
			json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: p.keys})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *idp) set(down bool, keys ...jose.JSONWebKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if keys != nil {
		p.keys = keys
	}
}

// signer is one private key with its kid.
type signer struct {
	kid string
	alg string
	key crypto.Signer
}

func newRSA(t testing.TB, kid string) *signer {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{kid: kid, alg: "RS256", key: k}
}

func newEC(t testing.TB, kid string) *signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{kid: kid, alg: "ES256", key: k}
}

func (s *signer) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: s.key.Public(), KeyID: s.kid, Algorithm: s.alg, Use: "sig"}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func js(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// sign makes a compact JWS of header and claims signed by s with alg
// (RS256 or ES256), written by hand so headers can be anything.
func (s *signer) sign(header, claims map[string]any) string {
	in := b64(js(header)) + "." + b64(js(claims))
	sum := sha256.Sum256([]byte(in))
	var sig []byte
	switch k := s.key.(type) {
	case *rsa.PrivateKey:
		sig, _ = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
	case *ecdsa.PrivateKey:
		r, ss, _ := ecdsa.Sign(rand.Reader, k, sum[:])
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		ss.FillBytes(sig[32:])
	}
	return in + "." + b64(sig)
}

// hs256 signs header and claims with HMAC-SHA256 under secret.
func hs256(header, claims map[string]any, secret []byte) string {
	in := b64(js(header)) + "." + b64(js(claims))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + b64(m.Sum(nil))
}

func pemOf(t testing.TB, pub crypto.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

var testNow = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

const testIss = "https://idp.test"

func goodClaims() map[string]any {
	return map[string]any{
		"iss": testIss, "aud": "orders-api", "sub": "user-1", "azp": "shop",
		"exp": testNow.Add(time.Hour).Unix(), "iat": testNow.Add(-time.Minute).Unix(),
		"scope": "orders read",
	}
}

func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock    { c := &clock{}; c.ns.Store(t.UnixNano()); return c }
func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

func newIssuer(t testing.TB, ks *KeySet) *Issuer {
	return (&Issuer{Name: "corp", Issuer: testIss, Audiences: []string{"orders-api"},
		Algorithms: []string{"RS256", "ES256"}, ClockSkew: 30 * time.Second, MaxTokenBytes: 8192,
		AppClaim: "azp", ScopesClaim: "scope", Keys: ks}).Init()
}

func startKeys(t testing.TB, p *idp, clk *clock, state string) *KeySet {
	ks, err := NewKeySet(KeySetOptions{JWKSURI: p.srv.URL + "/jwks", Now: clk.Now, StateFile: state, Client: p.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ks
}

var _ = big.NewInt

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
