package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// clientCertLevee starts levee with an auth: client_cert route "certs"
// behind a TLS listener asking for client certificates of ca (mode
// request: a client may come without one) and returns it.
func clientCertLevee(t *testing.T, ca *testCA, extra string) *harness {
	t.Helper()
	server := ca.issue("server", pkix.Name{CommonName: "server"}, []string{"mtls.example.com"}, time.Now().Add(time.Hour), false)
	return start(t, fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
tls: {cert_file: %s, key_file: %s, client_auth: {ca_file: %s, mode: request}}
%s
upstreams:
  u: {endpoints: [{address: %s}]}
routes:
  - {name: basic, match: {path_prefix: /basic/}, upstream: u, auth: basic}
  - {name: certs, match: {path_prefix: /}, upstream: u, auth: client_cert}
`, server.certFile, server.keyFile, ca.file, extra, hostPort(echoBackend(t))))
}

// certClient is an HTTPS client of levee at addr presenting pair (none
// when pair is nil), over HTTP/1.1 or HTTP/2.
func certClient(t *testing.T, ca *testCA, pair *tls.Certificate, h2 bool) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: ca.pool, ServerName: "mtls.example.com"}
	if pair != nil {
		cfg.Certificates = []tls.Certificate{*pair}
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// certAnswer is a request's answer: status, the app the upstream saw (its
// echo) or the refusal's reason and detail, and WWW-Authenticate.
type certAnswer struct {
	status                int
	app, reason, detail   string
	challenge, retryAfter string
	proto                 string
	authorizationUpstream string
}

func certGet(t *testing.T, c *http.Client, h *harness, hdr ...string) certAnswer {
	t.Helper()
	return certGetPath(t, c, h, "/x", hdr...)
}

func certGetPath(t *testing.T, c *http.Client, h *harness, path string, hdr ...string) certAnswer {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://"+h.g.Addr().String()+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var doc map[string]string
	json.Unmarshal(b, &doc)
	return certAnswer{status: resp.StatusCode, app: doc["app"], reason: doc["reason"], detail: doc["detail"],
		challenge: resp.Header.Get("Www-Authenticate"), retryAfter: resp.Header.Get("Retry-After"), proto: resp.Proto,
		authorizationUpstream: doc["authorization"]}
}

// TestClientCertAuth (issue 26 item 6): over real TLS, a client whose
// verified certificate's fingerprint is mapped is its app (the upstream
// gets Levee-App, the app's route limit applies: burst 2, then 429), over
// HTTP/1.1 and HTTP/2; a SAN URI mapping names another app; an unmapped
// certificate is 401 client_cert_unknown, none at all 401
// client_cert_missing; an app without the grant 403 no_grant; a mapping
// deleted through the admin API refuses the next request on the same
// connection. Counted under levee_auth_*{scheme="client_cert"}.
func TestClientCertAuth(t *testing.T) {
	ca := newTestCA(t, "client-ca")
	h := clientCertLevee(t, ca, "")
	alice := ca.issue("alice", pkix.Name{CommonName: "alice"}, nil, time.Now().Add(time.Hour), true)
	carol := ca.issue("carol", pkix.Name{CommonName: "carol"}, []string{"carol.internal"}, time.Now().Add(time.Hour), true)
	mesh := issueWithURI(t, ca, "mesh", "spiffe://example.org/ns/prod/sa/orders")
	sum := sha256.Sum256(alice.leaf.Raw)

	for _, body := range []string{
		`{"id": "svc", "grants": ["certs"], "route_limits": {"certs": {"rate": 0.01, "burst": 2}}}`,
		`{"id": "orders", "grants": ["certs"]}`,
		`{"id": "ungranted"}`,
	} {
		if st := h.adminJSON("POST", "/api/v1/apps", body, nil); st != 201 {
			t.Fatalf("create %s: %d", body, st)
		}
	}
	var fp struct {
		ID                string `json:"id"`
		FingerprintSHA256 string `json:"fingerprint_sha256"`
	}
	// openssl's colon form, upper case: stored canonical.
	colons := strings.ToUpper(hex.EncodeToString(sum[:]))
	var parts []string
	for i := 0; i < len(colons); i += 2 {
		parts = append(parts, colons[i:i+2])
	}
	if st := h.adminJSON("POST", "/api/v1/apps/svc/certificates", `{"fingerprint_sha256": "`+strings.Join(parts, ":")+`"}`, &fp); st != 201 || fp.FingerprintSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("map alice: %d %+v", st, fp)
	}
	if st := h.adminJSON("POST", "/api/v1/apps/orders/certificates", `{"san_uri": "spiffe://example.org/ns/prod/sa/orders"}`, nil); st != 201 {
		t.Fatalf("map the SPIFFE ID: %d", st)
	}
	if st := h.adminJSON("POST", "/api/v1/apps/ungranted/certificates", `{"san_dns": "carol.internal"}`, nil); st != 201 {
		t.Fatalf("map carol's name: %d", st)
	}
	for body, want := range map[string]int{
		`{"san_uri": "spiffe://example.org/ns/prod/sa/orders"}`: 409, // mapped already
		`{"san_dns": "*.internal"}`:                             422,
		`{"subject": "CN=alice"}`:                               400, // not a field
		`{}`:                                                    422,
	} {
		if st := h.adminJSON("POST", "/api/v1/apps/svc/certificates", body, nil); st != want {
			t.Errorf("POST %s: %d, want %d", body, st, want)
		}
	}

	aliceH1 := certClient(t, ca, &alice.pair, false)
	a := certGet(t, aliceH1, h, "Authorization", "Bearer end-user-token")
	if a.status != 200 || a.app != "svc" || a.authorizationUpstream != "Bearer end-user-token" {
		t.Fatalf("alice over HTTP/1.1: %+v, want 200 as svc with her Authorization passed on", a)
	}
	if a = certGet(t, certClient(t, ca, &alice.pair, true), h); a.status != 200 || a.app != "svc" || a.proto != "HTTP/2.0" {
		t.Fatalf("alice over HTTP/2: %+v", a)
	}
	if a = certGet(t, aliceH1, h); a.status != 429 || a.reason != "rate_limited" || a.retryAfter == "" {
		t.Fatalf("alice's third request (svc's burst is 2): %+v, want 429 rate_limited", a)
	}
	if a = certGet(t, certClient(t, ca, &mesh.pair, false), h); a.status != 200 || a.app != "orders" {
		t.Fatalf("the SPIFFE ID: %+v, want 200 as orders", a)
	}
	if a = certGet(t, certClient(t, ca, &carol.pair, false), h); a.status != 403 || a.detail != "no_grant" {
		t.Fatalf("carol (app without the grant): %+v, want 403 no_grant", a)
	}
	stranger := ca.issue("stranger", pkix.Name{CommonName: "stranger"}, []string{"stranger.internal"}, time.Now().Add(time.Hour), true)
	if a = certGet(t, certClient(t, ca, &stranger.pair, false), h); a.status != 401 || a.detail != "client_cert_unknown" || a.challenge != `ClientCertificate realm="levee"` {
		t.Fatalf("an unmapped certificate: %+v, want 401 client_cert_unknown with the challenge", a)
	}
	if a = certGet(t, certClient(t, ca, nil, false), h); a.status != 401 || a.detail != "client_cert_missing" {
		t.Fatalf("no certificate: %+v, want 401 client_cert_missing", a)
	}

	// Revocation: the mapping deleted, the next request on alice's open
	// connection is refused (a new route limit window is not needed: 401
	// comes before limits).
	if st := h.adminJSON("DELETE", "/api/v1/apps/svc/certificates/"+fp.ID, "", nil); st != 200 {
		t.Fatalf("delete alice's mapping: %d", st)
	}
	if a = certGet(t, aliceH1, h); a.status != 401 || a.detail != "client_cert_unknown" {
		t.Fatalf("alice after the mapping's deletion: %+v, want 401 client_cert_unknown", a)
	}
	var list struct {
		Certificates []map[string]string `json:"certificates"`
	}
	if st := h.adminJSON("GET", "/api/v1/apps/svc/certificates", "", &list); st != 200 || len(list.Certificates) != 0 {
		t.Errorf("svc's mappings after the deletion: %d %v", st, list)
	}
	for series, want := range map[string]float64{
		`levee_auth_requests_total{result="accepted",scheme="client_cert"}`:            4, // alice three times (her 429 comes after auth), mesh
		`levee_auth_failures_total{reason="client_cert_unknown",scheme="client_cert"}`: 2,
		`levee_auth_failures_total{reason="client_cert_missing",scheme="client_cert"}`: 1,
		`levee_auth_failures_total{reason="no_grant",scheme="client_cert"}`:            1,
	} {
		if got := h.metric(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// issueWithURI signs a client certificate for ca whose only subject
// alternative name is the URI u (a SPIFFE ID).
func issueWithURI(t *testing.T, ca *testCA, cn, u string) issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	uri, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: randomSerial(t), Subject: pkix.Name{CommonName: cn}, URIs: []*url.URL{uri},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return issued{leaf: leaf, pair: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}}
}

// TestClusterSharesPasswordsAndCertificates (issue 26 item 8): two
// gateways on one real etcd. A basic-auth password made through node 1's
// admin API admits on node 2, and revoked through node 2 refuses on node
// 1; a certificate mapping added on node 1 admits on node 2 (over real
// TLS with a client certificate), and deleted on node 2 refuses on node
// 1. Each change is polled for with a deadline; how long it took is
// logged.
func TestClusterSharesPasswordsAndCertificates(t *testing.T) {
	e := testsvc.StartEtcd(t)
	ca := newTestCA(t, "client-ca")
	extra := func(node string) string {
		return fmt.Sprintf(`cluster:
  node_id: %s
  etcd: {endpoints: [%s], prefix: /creds/, lease_ttl: 2s, dial_timeout: 500ms, op_timeout: 2s}`, node, e.Endpoint)
	}
	n1 := clientCertLevee(t, ca, extra("node-1"))
	n2 := clientCertLevee(t, ca, extra("node-2"))
	if st := n1.adminJSON("POST", "/api/v1/apps", `{"id": "svc", "grants": ["basic", "certs"]}`, nil); st != 201 {
		t.Fatalf("create the app on node 1: %d", st)
	}
	anon1, anon2 := certClient(t, ca, nil, false), certClient(t, ca, nil, false)
	basic := func(c *http.Client, h *harness, pw string) certAnswer {
		return certGetPath(t, c, h, "/basic/x", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("svc:"+pw)))
	}
	took := func(what string, cond func() bool) {
		t.Helper()
		start := time.Now()
		waitFor(t, what, cond)
		t.Logf("%s after %v", what, time.Since(start).Round(time.Millisecond))
	}

	var pw struct {
		ID       string `json:"id"`
		Password string `json:"password"`
	}
	if st := n1.adminJSON("POST", "/api/v1/apps/svc/passwords", "", &pw); st != 201 || pw.Password == "" {
		t.Fatalf("create a password on node 1 (no longer 501 in cluster mode): %d %+v", st, pw)
	}
	if a := basic(anon1, n1, pw.Password); a.status != 200 || a.app != "svc" {
		t.Fatalf("the password on node 1: %+v", a)
	}
	// Polled through the admin API, not with requests: each wrong
	// attempt would count against 127.0.0.1's failure limit (10 a minute).
	passwords := func(h *harness) (active []string) {
		var a struct {
			Passwords []struct {
				ID      string `json:"id"`
				Revoked string `json:"revoked"`
			} `json:"passwords"`
		}
		h.adminJSON("GET", "/api/v1/apps/svc", "", &a)
		for _, p := range a.Passwords {
			if p.Revoked == "" {
				active = append(active, p.ID)
			}
		}
		return active
	}
	took("node 2 holding node 1's password", func() bool { return slices.Equal(passwords(n2), []string{pw.ID}) })
	if a := basic(anon2, n2, pw.Password); a.status != 200 || a.app != "svc" {
		t.Fatalf("node 1's password on node 2: %+v", a)
	}
	if st := n2.adminJSON("DELETE", "/api/v1/apps/svc/passwords/"+pw.ID, "", nil); st != 200 {
		t.Fatalf("revoke the password on node 2: %d", st)
	}
	took("node 1 dropping the password node 2 revoked", func() bool { return len(passwords(n1)) == 0 })
	if a := basic(anon1, n1, pw.Password); a.status != 401 || a.detail != "bad_password" {
		t.Fatalf("the password revoked on node 2, on node 1 (its success cached there): %+v", a)
	}

	alice := ca.issue("alice", pkix.Name{CommonName: "alice"}, []string{"alice.internal"}, time.Now().Add(time.Hour), true)
	alice1, alice2 := certClient(t, ca, &alice.pair, false), certClient(t, ca, &alice.pair, false)
	if a := certGet(t, alice2, n2); a.status != 401 || a.detail != "client_cert_unknown" {
		t.Fatalf("alice on node 2 before any mapping: %+v", a)
	}
	var c struct {
		ID string `json:"id"`
	}
	if st := n1.adminJSON("POST", "/api/v1/apps/svc/certificates", `{"san_dns": "alice.internal"}`, &c); st != 201 {
		t.Fatalf("map alice on node 1: %d", st)
	}
	if a := certGet(t, alice1, n1); a.status != 200 || a.app != "svc" {
		t.Fatalf("alice on node 1: %+v", a)
	}
	took("node 2 admitting the certificate mapped on node 1", func() bool {
		a := certGet(t, alice2, n2)
		return a.status == 200 && a.app == "svc"
	})
	if st := n2.adminJSON("POST", "/api/v1/apps/svc/certificates", `{"san_dns": "ALICE.internal"}`, nil); st != 409 {
		t.Errorf("the same name mapped again on node 2: %d, want 409", st)
	}
	if st := n2.adminJSON("DELETE", "/api/v1/apps/svc/certificates/"+c.ID, "", nil); st != 200 {
		t.Fatalf("delete the mapping on node 2: %d", st)
	}
	took("node 1 refusing the certificate unmapped on node 2", func() bool {
		a := certGet(t, alice1, n1)
		return a.status == 401 && a.detail == "client_cert_unknown"
	})
}
