package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

func hydraConfig(upstream, issuer, stateDir string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
state_dir: %s
identity:
  jwt_issuers:
    hydra:
      issuer: %s
      discovery: %s
      audiences: [orders-api]
      algorithms: [RS256, ES256]
      app_claim: client_id
      scopes_claim: scp
      min_refresh_interval: 1s
upstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: orders, match: {path_prefix: /orders/}, upstream: data, auth: jwt}
  - {name: admin, match: {path_prefix: /admin/}, upstream: data, auth: jwt}
apps:
  - {id: shop, grants: [orders, admin]}
  - {id: other, grants: [admin]}
`, stateDir, issuer, issuer, upstream)
}

// TestJWTHydra: levee against a real Ory Hydra (testsvc.StartHydra) over
// real sockets. A client-credentials token is admitted with its app
// (client_id) and its scopes (scp) applied: a route outside the scopes
// 403 no_scope, an app without the grant 403 no_grant. Hydra rotates its
// signing key while requests flow: zero failures. 10,000 requests with
// random kids cost at most one JWKS fetch per min_refresh_interval
// (levee_jwks_fetches_total). Hydra stopped: the cached keys keep
// verifying; a levee started while Hydra is down verifies from the key
// set in its state_dir.
func TestJWTHydra(t *testing.T) {
	idp := testsvc.StartHydra(t)
	aud := []string{"orders-api"}
	idp.CreateClient(t, "shop", "shop-secret-0123456789", []string{"orders"}, aud)
	idp.CreateClient(t, "other", "other-secret-0123456789", []string{"orders"}, aud)
	upstream := hostPort(echoBackend(t))
	state := t.TempDir()
	h := start(t, hydraConfig(upstream, idp.PublicURL, state))
	call := func(h *harness, path, tok string) (int, map[string]string) {
		t.Helper()
		resp := h.get(path, "Authorization", "Bearer "+tok)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]string
		json.Unmarshal(raw, &m)
		return resp.StatusCode, m
	}
	shopTok := func() string { return idp.Token(t, "shop", "shop-secret-0123456789", []string{"orders"}, aud) }
	tok := shopTok()
	if code, body := call(h, "/orders/1", tok); code != 200 || body["app"] != "shop" {
		t.Fatalf("hydra token: %d %v", code, body)
	}
	if code, body := call(h, "/admin/1", tok); code != 403 || body["detail"] != "no_scope" {
		t.Fatalf("scope missing: %d %v, want 403 no_scope", code, body)
	}
	otherTok := idp.Token(t, "other", "other-secret-0123456789", []string{"orders"}, aud)
	if code, body := call(h, "/orders/1", otherTok); code != 403 || body["detail"] != "no_grant" {
		t.Fatalf("grant missing: %d %v, want 403 no_grant", code, body)
	}

	// Rotation while requests flow: each request carries a token fresh
	// from Hydra; half-way Hydra gets a new signing key.
	var sent, failed, afterRotation atomic.Int64
	var rotatedAt atomic.Bool
	var lastTok atomic.Pointer[string]
	stop := make(chan struct{})
	flowDone := make(chan string, 1)
	go func() {
		// Bounded: until stop, or 60 s.
		var firstErr string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
			select {
			case <-stop:
				flowDone <- firstErr
				return
			default:
			}
			after := rotatedAt.Load()
			tk, err := idp.TokenE("shop", "shop-secret-0123456789", []string{"orders"}, aud)
			if err != nil { // the provider's failure, not levee's: the test fails all the same
				failed.Add(1)
				if firstErr == "" {
					firstErr = err.Error()
				}
				continue
			}
			sent.Add(1)
			if after {
				afterRotation.Add(1)
				lastTok.Store(&tk)
			}
			resp := h.get("/orders/1", "Authorization", "Bearer "+tk)
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				failed.Add(1)
				if firstErr == "" {
					firstErr = fmt.Sprintf("request %d: %d %s", sent.Load(), resp.StatusCode, raw)
				}
			}
		}
		flowDone <- firstErr
	}()
	// Rotate min_refresh_interval (1s) after levee's last fetch, while
	// the requests flow, then let 50 more requests through.
	waitFor(t, "20 requests before the rotation", func() bool { return sent.Load() >= 20 })
	time.Sleep(1100 * time.Millisecond) // the refetch interval, not a state: nothing to poll
	idp.RotateKey(t, "levee-rotated-1")
	rotatedAt.Store(true)
	waitFor(t, "50 requests after the rotation", func() bool { return afterRotation.Load() >= 50 })
	close(stop)
	if msg := <-flowDone; failed.Load() != 0 || afterRotation.Load() < 50 {
		t.Fatalf("rotation: %d requests, %d after it, %d failed (%s)", sent.Load(), afterRotation.Load(), failed.Load(), msg)
	}
	newTok := *lastTok.Load()
	if kidOf(newTok) != "levee-rotated-1" {
		t.Fatalf("the last token names kid %q, not the rotated key", kidOf(newTok))
	}

	// 10,000 random kids (signed by a key Hydra never had, with Hydra's
	// iss): each refused, at most one fetch per 1s interval.
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	forger := jwtKey{"x", "ES256", ek}
	fetchesBefore := h.metric(`levee_jwks_fetches_total{issuer="hydra"}`)
	began := time.Now()
	for i := 0; i < 10000; i++ {
		ft := forger.sign(map[string]any{"alg": "ES256", "kid": fmt.Sprintf("rnd-%d", i)},
			jwtClaims("iss", idp.PublicURL, "azp", nil, "client_id", "shop", "scp", []string{"orders"}))
		resp := h.get("/orders/1", "Authorization", "Bearer "+ft)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("random kid %d: %d", i, resp.StatusCode)
		}
	}
	elapsed := time.Since(began)
	fetches := h.metric(`levee_jwks_fetches_total{issuer="hydra"}`) - fetchesBefore
	if limit := float64(elapsed/time.Second) + 1; fetches > limit {
		t.Fatalf("%v JWKS fetches for 10000 random kids in %v (limit %v)", fetches, elapsed, limit)
	}

	// The auth metrics: each refusal by its detail (a random kid is
	// invalid_token, or key_unavailable while a fetch takes over 1 s).
	refused := h.metric(`levee_auth_failures_total{reason="invalid_token",scheme="jwt"}`)
	if v, ok := h.lookupMetric(`levee_auth_failures_total{reason="key_unavailable",scheme="jwt"}`); ok {
		refused += v
	}
	if refused != 10000 || h.metric(`levee_auth_failures_total{reason="no_scope",scheme="jwt"}`) != 1 ||
		h.metric(`levee_auth_failures_total{reason="no_grant",scheme="jwt"}`) != 1 ||
		h.metric(`levee_auth_requests_total{result="forbidden",scheme="jwt"}`) != 2 ||
		h.metric(`levee_auth_requests_total{result="accepted",scheme="jwt"}`) != float64(sent.Load()+1) {
		t.Fatalf("auth metrics:\n%s", h.metricsPage())
	}

	// Hydra stopped: tokens of both keys keep verifying from the cache.
	idp.Stop()
	for i := 0; i < 20; i++ {
		for _, tk := range []string{tok, newTok} {
			if code, body := call(h, "/orders/1", tk); code != 200 {
				t.Fatalf("Hydra down, request %d: %d %v", i, code, body)
			}
		}
	}
	// A levee started while Hydra is down verifies from its state_dir.
	state2 := t.TempDir()
	b, err := os.ReadFile(filepath.Join(state, "jwks-hydra.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state2, "jwks-hydra.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	h2 := start(t, hydraConfig(upstream, idp.PublicURL, state2))
	for _, tk := range []string{tok, newTok} {
		if code, body := call(h2, "/orders/1", tk); code != 200 || body["app"] != "shop" {
			t.Fatalf("levee restarted with Hydra down: %d %v", code, body)
		}
	}
	t.Logf("Hydra %s: rotation with %d requests (%d after it), 0 failed; 10000 random kids in %v: %v JWKS fetches; Hydra down: cached and state_dir keys verify",
		testsvc.HydraVersion, sent.Load(), afterRotation.Load(), elapsed.Round(time.Millisecond), fetches)
}

// kidOf is the kid in a compact JWS's header.
func kidOf(tok string) string {
	b, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	var h struct{ Kid string }
	json.Unmarshal(b, &h)
	return h.Kid
}
