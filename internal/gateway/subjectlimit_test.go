package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/testsvc"
)

// subjectConfig: issuer corp with per_subject {rate 0.01/s, burst 3}
// (nothing refills during a test), app shop; cluster is a cluster block
// or "".
func subjectConfig(upstream, jwks, cluster string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
%s
identity:
  jwt_issuers:
    corp:
      issuer: https://idp.test
      jwks_uri: %s
      audiences: [orders-api]
      algorithms: [ES256]
      per_subject: {rate: 0.01, burst: 3}
upstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: orders, match: {path_prefix: /orders/}, upstream: data, auth: jwt}
apps:
  - {id: shop, grants: [orders]}
`, cluster, jwks, upstream)
}

// TestPerSubjectLimits: two users (sub) of one app: alice over her
// per-subject burst of 3 is answered 429 rate_limited, detail
// per_subject, with Retry-After, while bob, same app, is unaffected; a
// subject of 10,000 bytes is limited too (keyed by its digest). Then the
// same across two levee nodes sharing a real Redis: alice's 3 admissions
// are shared (2 on one node + 1 on the other, then 429 on both).
func TestPerSubjectLimits(t *testing.T) {
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k := jwtKey{"e1", "ES256", ek}
	idp := newJWKSServer(t, k.public())
	up := hostPort(echoBackend(t))
	tokFor := func(sub string) string {
		return k.sign(map[string]any{"alg": "ES256", "kid": "e1"}, jwtClaims("sub", sub, "scope", nil))
	}
	call := func(h *harness, tok string) (int, string, map[string]string) {
		t.Helper()
		resp := h.get("/orders/1", "Authorization", "Bearer "+tok)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]string
		json.Unmarshal(raw, &m)
		return resp.StatusCode, resp.Header.Get("Retry-After"), m
	}
	check := func(name string, h *harness, sub string, want int) {
		t.Helper()
		code, ra, body := call(h, tokFor(sub))
		if code != want {
			t.Fatalf("%s: %.20s: %d %v, want %d", name, sub, code, body, want)
		}
		if want == 429 && (body["reason"] != "rate_limited" || body["detail"] != "per_subject" || ra == "") {
			t.Fatalf("%s: %.20s: 429 %v Retry-After %q, want rate_limited per_subject with Retry-After", name, sub, body, ra)
		}
	}
	h := start(t, subjectConfig(up, idp.srv.URL, ""))
	for i := 0; i < 3; i++ {
		check("one node", h, "alice", 200)
	}
	check("one node", h, "alice", 429)
	for i := 0; i < 3; i++ {
		check("one node", h, "bob", 200) // same app, own limit
	}
	check("one node", h, "bob", 429)
	long := strings.Repeat("u", 3000) // under max_token_bytes (8 KiB), over the 128-byte key cap
	for i := 0; i < 3; i++ {
		check("one node", h, long, 200)
	}
	check("one node", h, long, 429)

	r := testsvc.StartRedis(t)
	cl := fmt.Sprintf("cluster:\n  node_id: %%s\n  redis: {address: %s, prefix: \"subj:\", timeout: 1s}", r.Address)
	n1 := start(t, subjectConfig(up, idp.srv.URL, fmt.Sprintf(cl, "n1")))
	n2 := start(t, subjectConfig(up, idp.srv.URL, fmt.Sprintf(cl, "n2")))
	check("cluster n1", n1, "alice", 200)
	check("cluster n1", n1, "alice", 200)
	check("cluster n2", n2, "alice", 200)
	check("cluster n2", n2, "alice", 429)
	check("cluster n1", n1, "alice", 429)
	check("cluster n2", n2, "bob", 200)
	t.Logf("per-subject burst 3: alice 429 after 3 (one node, and 2+1 across two nodes sharing Redis), bob unaffected; a 3,000-byte subject limited by its digest")
}
