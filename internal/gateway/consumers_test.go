package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/levee-gw/levee/client"
)

// echoBackend answers with the request headers an upstream may see, as
// JSON.
func echoBackend(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		json.NewEncoder(w).Encode(map[string]string{
			"app": r.Header.Get("Levee-App"), "x-api-key": r.Header.Get("X-Api-Key"),
			"authorization": r.Header.Get("Authorization"), "body": string(body),
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// keyHash is the api_key_sha256 of a plaintext key.
func keyHash(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

// consumerRefusal is levee's refusal body with its detail.
type consumerRefusal struct {
	Reason, Detail, Error string
}

// expectConsumerRefusal asserts status, reason, detail, and (for a 401)
// the WWW-Authenticate challenge.
func expectConsumerRefusal(t *testing.T, step string, resp *http.Response, status int, reason, detail string) {
	t.Helper()
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r consumerRefusal
	if err := json.Unmarshal(raw, &r); err != nil || resp.StatusCode != status || r.Reason != reason || r.Detail != detail || r.Error == "" {
		t.Errorf("%s: %d %s, want %d reason %q detail %q", step, resp.StatusCode, raw, status, reason, detail)
	}
	if status == 401 && resp.Header.Get("Www-Authenticate") == "" {
		t.Errorf("%s: 401 without WWW-Authenticate", step)
	}
	if status == 403 && resp.Header.Get("Www-Authenticate") != "" {
		t.Errorf("%s: 403 with WWW-Authenticate (the credentials are fine)", step)
	}
}

const (
	goodKey      = "lvk_good-key-0123456789abcdefghij"
	suspendedKey = "lvk_suspended-0123456789abcdefghij"
	nograntKey   = "lvk_nogrant-0123456789abcdefghijk"
)

func consumersConfig(upstream string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: keyed, match: {path_prefix: /keyed/}, upstream: data, auth: api_key}
  - {name: signed, match: {path_prefix: /signed/}, upstream: data, auth: hmac}
  - {name: limited, match: {path_prefix: /limited/}, upstream: data, auth: api_key}
  - {name: quota, match: {path_prefix: /quota/}, upstream: data, auth: api_key}
  - {name: open, match: {path_prefix: /}, upstream: data, anonymous_limits: {rate: 1, burst: 2}}
apps:
  - id: good
    api_key_sha256: [%s]
    grants: [keyed, signed, limited, quota]
    route_limits:
      limited: {rate: 1, burst: 3}
      quota: {quota: {requests: 2, per: 24h}}
  - {id: sleepy, status: suspended, api_key_sha256: [%s], grants: [keyed]}
  - {id: nogrant, api_key_sha256: [%s], grants: [signed]}
`, upstream, keyHash(goodKey), keyHash(suspendedKey), keyHash(nograntKey))
}

// TestAPIKeyAuth: every 401 and 403 of an api_key route, and what the
// upstream sees of an admitted request: the app's id, not the key.
func TestAPIKeyAuth(t *testing.T) {
	h := start(t, consumersConfig(hostPort(echoBackend(t))))
	expectConsumerRefusal(t, "no key", h.get("/keyed/"), 401, "unauthenticated", "missing_credentials")
	expectConsumerRefusal(t, "unknown key", h.get("/keyed/", "X-Api-Key", "lvk_not-a-key-of-anyone-0123456789"), 401, "unauthenticated", "unknown_key")
	expectConsumerRefusal(t, "two different keys", h.get("/keyed/", "X-Api-Key", goodKey, "Authorization", "Bearer "+nograntKey), 401, "unauthenticated", "malformed_credentials")
	expectConsumerRefusal(t, "Basic scheme", h.get("/keyed/", "Authorization", "Basic Zm9vOmJhcg=="), 401, "unauthenticated", "malformed_credentials")
	expectConsumerRefusal(t, "suspended app", h.get("/keyed/", "X-Api-Key", suspendedKey), 403, "forbidden", "suspended")
	expectConsumerRefusal(t, "no grant", h.get("/keyed/", "Authorization", "Bearer "+nograntKey), 403, "forbidden", "no_grant")

	for _, hdr := range [][]string{{"X-Api-Key", goodKey}, {"Authorization", "Bearer " + goodKey}} {
		resp := h.get("/keyed/", hdr[0], hdr[1], "Levee-App", "spoofed")
		var seen map[string]string
		json.NewDecoder(resp.Body).Decode(&seen)
		resp.Body.Close()
		if resp.StatusCode != 200 || seen["app"] != "good" || seen["x-api-key"] != "" || seen["authorization"] != "" {
			t.Errorf("%s: %d, upstream saw %v; want 200, Levee-App good and no credentials", hdr[0], resp.StatusCode, seen)
		}
	}
	// An anonymous route: a client's Levee-App never reaches the upstream.
	resp := h.get("/open", "Levee-App", "spoofed")
	var seen map[string]string
	json.NewDecoder(resp.Body).Decode(&seen)
	resp.Body.Close()
	if seen["app"] != "" {
		t.Errorf("anonymous route passed a client's Levee-App %q upstream", seen["app"])
	}
	if got := h.metric(`levee_refusals_total{reason="unauthenticated",route="keyed"}`); got != 4 {
		t.Errorf("unauthenticated refusals counted %v, want 4", got)
	}
	if got := h.metric(`levee_refusals_total{reason="forbidden",route="keyed"}`); got != 2 {
		t.Errorf("forbidden refusals counted %v, want 2 (suspended, no grant)", got)
	}
}

// TestHMACAuth: a request signed with client.Sign is admitted once;
// replaying it, tampering with it or signing with a stale date is refused
// with the precise detail.
func TestHMACAuth(t *testing.T) {
	h := start(t, consumersConfig(hostPort(echoBackend(t))))
	secret := sha256.Sum256([]byte(goodKey))
	keyID := keyHash(goodKey)[:12]
	signed := func(method, path string, body []byte, at time.Time) *http.Request {
		req, _ := http.NewRequest(method, h.base+path, bytes.NewReader(body))
		if err := client.Sign(req, keyID, secret[:], body, at); err != nil {
			t.Fatal(err)
		}
		return req
	}
	do := func(req *http.Request) *http.Response {
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	body := []byte(`{"query":"select 1"}`)
	resp := do(signed("POST", "/signed/q?b=2&a=1", body, time.Now()))
	var seen map[string]string
	json.NewDecoder(resp.Body).Decode(&seen)
	resp.Body.Close()
	if resp.StatusCode != 200 || seen["app"] != "good" || seen["body"] != string(body) || seen["authorization"] != "" {
		t.Fatalf("signed request: %d, upstream saw %v", resp.StatusCode, seen)
	}
	replay := signed("GET", "/signed/x", nil, time.Now())
	again := replay.Clone(replay.Context())
	if resp := do(replay); resp.StatusCode != 200 {
		t.Fatalf("first use: %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	expectConsumerRefusal(t, "replay", do(again), 401, "unauthenticated", "replayed")

	tampered := signed("POST", "/signed/q", body, time.Now())
	tampered.Body = io.NopCloser(bytes.NewReader([]byte(`{"query":"drop table"}`)))
	tampered.ContentLength = 22
	expectConsumerRefusal(t, "tampered body", do(tampered), 401, "unauthenticated", "bad_signature")
	expectConsumerRefusal(t, "stale date", do(signed("GET", "/signed/x", nil, time.Now().Add(-6*time.Minute))), 401, "unauthenticated", "stale_date")
	req, _ := http.NewRequest("GET", h.base+"/signed/x", nil)
	if err := client.Sign(req, "000000000000", secret[:], nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	expectConsumerRefusal(t, "unknown key id", do(req), 401, "unauthenticated", "unknown_key")
	expectConsumerRefusal(t, "unsigned", h.get("/signed/x"), 401, "unauthenticated", "missing_credentials")
}

// TestRateLimitHeaders: an app's route limit of 1/s with a burst of 3
// admits 3 at once with RateLimit-Remaining 2, 1, 0, then answers 429
// rate_limited with Retry-After 1; a quota of 2 per day answers 429
// quota_exhausted with a Retry-After to the end of the UTC day; an
// anonymous route limits each client address.
func TestRateLimitHeaders(t *testing.T) {
	h := start(t, consumersConfig(hostPort(echoBackend(t))))
	for i, want := range []string{"2", "1", "0"} {
		resp := h.get("/limited/", "X-Api-Key", goodKey)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Ratelimit-Limit") != "3" || resp.Header.Get("Ratelimit-Remaining") != want {
			t.Fatalf("request %d: %d, RateLimit-Limit %q Remaining %q; want 200, 3, %s", i+1, resp.StatusCode,
				resp.Header.Get("Ratelimit-Limit"), resp.Header.Get("Ratelimit-Remaining"), want)
		}
	}
	resp := h.get("/limited/", "X-Api-Key", goodKey)
	if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Ratelimit-Remaining") != "0" {
		t.Errorf("429 headers: Retry-After %q RateLimit-Remaining %q, want 1 and 0", resp.Header.Get("Retry-After"), resp.Header.Get("Ratelimit-Remaining"))
	}
	expectConsumerRefusal(t, "over the rate", resp, 429, "rate_limited", "")

	for range 2 {
		resp := h.get("/quota/", "X-Api-Key", goodKey)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("within the quota: %d", resp.StatusCode)
		}
	}
	resp = h.get("/quota/", "X-Api-Key", goodKey)
	now := time.Now().UTC()
	toMidnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour).Sub(now)
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if d := time.Duration(ra) * time.Second; d < toMidnight-2*time.Second || d > toMidnight+2*time.Second {
		t.Errorf("quota Retry-After %ds, want about %v (the end of the UTC day)", ra, toMidnight.Round(time.Second))
	}
	expectConsumerRefusal(t, "over the quota", resp, 429, "quota_exhausted", "")

	for i := range 2 {
		resp := h.get("/open")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("anonymous request %d within the burst: %d", i+1, resp.StatusCode)
		}
	}
	expectConsumerRefusal(t, "anonymous over its burst", h.get("/open"), 429, "rate_limited", "")
}

// TestAppChangesApplyAtOnce: a grant added through the admin API and a
// suspension take effect on the next request.
func TestAppChangesApplyAtOnce(t *testing.T) {
	h := start(t, consumersConfig(hostPort(echoBackend(t))))
	in := &instance{t: t, g: h.g, admin: h.admin}
	expectConsumerRefusal(t, "before the grant", h.get("/keyed/", "X-Api-Key", nograntKey), 403, "forbidden", "no_grant")
	if status, doc := in.api("PATCH", "/api/v1/apps/nogrant", `{"grants":["signed","keyed"]}`); status != 200 {
		t.Fatalf("patch: %d %v", status, doc)
	}
	resp := h.get("/keyed/", "X-Api-Key", nograntKey)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after the grant: %d, want 200", resp.StatusCode)
	}
	if status, doc := in.api("PATCH", "/api/v1/apps/nogrant", `{"status":"suspended"}`); status != 200 {
		t.Fatalf("suspend: %d %v", status, doc)
	}
	expectConsumerRefusal(t, "suspended", h.get("/keyed/", "X-Api-Key", nograntKey), 403, "forbidden", "suspended")
}
