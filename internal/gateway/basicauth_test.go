package gateway

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// adminJSON sends method path with body to the admin API and decodes the
// answer into out (when not nil); it returns the status.
func (h *harness) adminJSON(method, path, body string, out any) int {
	h.t.Helper()
	req, err := http.NewRequest(method, h.admin+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func basicAuth(user, pw string) string {
	return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

// basicLevee starts levee with an auth: basic route behind a PROXY
// protocol peer (so each test connection can be its own client address)
// and an app "web" granted it, and returns it.
func basicLevee(t *testing.T) *harness {
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
server:
  proxy_protocol: {trusted: [127.0.0.0/8]}
upstreams:
  up: {endpoints: [{address: %s}]}
routes:
  - {name: basic, match: {path_prefix: /}, upstream: up, auth: basic}
`, hostPort(xffBackend(t))))
	if st := h.adminJSON("POST", "/api/v1/apps", `{"id": "web", "grants": ["basic"]}`, nil); st != 201 {
		t.Fatalf("create app: %d", st)
	}
	return h
}

// TestBasicAuth (issue 26 item 3): a generated and a chosen password
// admit the app; a wrong password, an unknown user and malformed
// credentials are 401 with the Basic challenge; a revoked password stops
// at once (even though its success is cached); the upstream never sees
// the credentials and gets the app's id.
func TestBasicAuth(t *testing.T) {
	h := basicLevee(t)
	var gen struct {
		ID       string `json:"id"`
		Password string `json:"password"`
	}
	if st := h.adminJSON("POST", "/api/v1/apps/web/passwords", "", &gen); st != 201 || !strings.HasPrefix(gen.Password, "lvp_") {
		t.Fatalf("generate a password: %d %+v", st, gen)
	}
	var chosen struct {
		ID       string `json:"id"`
		Password string `json:"password"`
	}
	if st := h.adminJSON("POST", "/api/v1/apps/web/passwords", `{"password": "correct horse battery"}`, &chosen); st != 201 || chosen.Password != "" {
		t.Fatalf("choose a password: %d %+v", st, chosen)
	}
	if st := h.adminJSON("POST", "/api/v1/apps/web/passwords", `{"password": "short"}`, nil); st != 422 {
		t.Fatalf("a short password: %d, want 422", st)
	}
	peer := 1
	conn := func() *rawConn {
		peer++
		return dialRaw(t, h, proxyV2(netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(peer)}), 1000)))
	}
	c := conn()
	for i := range 3 { // the second and third from the success cache
		if st, body := c.request("/", basicAuth("web", gen.Password)); st != 200 || !strings.HasPrefix(body, "xff=") {
			t.Fatalf("generated password, request %d: %d %q", i, st, body)
		}
	}
	if st, _ := c.request("/", basicAuth("web", "correct horse battery")); st != 200 {
		t.Fatalf("chosen password: %d", st)
	}
	for _, hdr := range []string{basicAuth("web", "wrong password!"), basicAuth("nobody", gen.Password), "Authorization: Basic !!!", ""} {
		resp := rawGet(t, conn(), hdr)
		if resp.StatusCode != 401 || resp.Header.Get("Www-Authenticate") != `Basic realm="levee", charset="UTF-8"` {
			t.Errorf("%q: %d %q, want 401 with the Basic challenge", hdr, resp.StatusCode, resp.Header.Get("Www-Authenticate"))
		}
	}
	if st := h.adminJSON("DELETE", "/api/v1/apps/web/passwords/"+gen.ID, "", nil); st != 200 {
		t.Fatalf("revoke: %d", st)
	}
	if st, body := c.request("/", basicAuth("web", gen.Password)); st != 401 || !strings.Contains(body, "bad_password") {
		t.Fatalf("revoked password (cached success): %d %q, want 401 bad_password", st, body)
	}
	if st, _ := c.request("/", basicAuth("web", "correct horse battery")); st != 200 {
		t.Fatalf("the other password after the revocation: %d", st)
	}
	if got := h.metric(`levee_auth_requests_total{result="accepted",scheme="basic"}`); got != 5 {
		t.Errorf("accepted basic requests counted %v, want 5", got)
	}
}

// rawGet sends one GET / with an optional header line on c and returns
// the response (body read).
func rawGet(t *testing.T, c *rawConn, hdr string) *http.Response {
	t.Helper()
	req := "GET / HTTP/1.1\r\nHost: levee.test\r\n"
	if hdr != "" {
		req += hdr + "\r\n"
	}
	if _, err := io.WriteString(c.c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestBasicAuthFailureLimit: the 11th failure within a minute from one
// address is 429 auth_failures with Retry-After, even with the right
// password; another address is unaffected.
func TestBasicAuthFailureLimit(t *testing.T) {
	h := basicLevee(t)
	var pw struct {
		Password string `json:"password"`
	}
	h.adminJSON("POST", "/api/v1/apps/web/passwords", "", &pw)
	bad := dialRaw(t, h, proxyV2(netip.MustParseAddrPort("198.51.100.9:1")))
	for i := range 10 {
		if st, _ := bad.request("/", basicAuth("web", fmt.Sprintf("wrong-%d", i))); st != 401 {
			t.Fatalf("failure %d: %d, want 401", i, st)
		}
	}
	resp := rawGet(t, bad, basicAuth("web", pw.Password))
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the right password after 10 failures: %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	good := dialRaw(t, h, proxyV2(netip.MustParseAddrPort("198.51.100.10:1")))
	if st, _ := good.request("/", basicAuth("web", pw.Password)); st != 200 {
		t.Fatalf("another address: %d, want 200", st)
	}
	if got := h.metric(`levee_refusals_total{reason="auth_failures",route="basic"}`); got != 1 {
		t.Errorf("auth_failures counted %v, want 1", got)
	}
}
