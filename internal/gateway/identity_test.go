package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestKeyNeverMovesToASecondApp: over real sockets, a file that gives a
// key to a second app while the first still holds it (the first was
// changed at runtime, so the file no longer rewrites it) does not move
// the key: seeding refuses the second app, the key keeps admitting the
// first, and the log says why. A key is never held by two apps, so the
// request path never has to choose.
func TestKeyNeverMovesToASecondApp(t *testing.T) {
	upstream := hostPort(echoBackend(t))
	cfg := func(apps string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: keyed, match: {path_prefix: /}, upstream: data, auth: api_key}
apps:
%s`, upstream, apps)
	}
	h := start(t, cfg(fmt.Sprintf("  - {id: first, api_key_sha256: [%s], grants: [keyed]}\n", keyHash(goodKey))))
	appOf := func(step string) string {
		t.Helper()
		resp := h.get("/", "X-Api-Key", goodKey)
		defer resp.Body.Close()
		var seen map[string]string
		json.NewDecoder(resp.Body).Decode(&seen)
		if resp.StatusCode != 200 {
			raw, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s: %d %s", step, resp.StatusCode, raw)
		}
		return seen["app"]
	}
	if got := appOf("at start"); got != "first" {
		t.Fatalf("at start the key admits %q, want first", got)
	}
	req, _ := http.NewRequest(http.MethodPatch, h.admin+"/api/v1/apps/first", strings.NewReader(`{"name":"changed at runtime"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("patch: %d", resp.StatusCode)
	}

	h.writeConfig(cfg(fmt.Sprintf("  - {id: first, grants: [keyed]}\n  - {id: second, api_key_sha256: [%s], grants: [keyed]}\n", keyHash(goodKey))))
	if err := h.g.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := appOf("after the reload"); got != "first" {
		t.Errorf("after the reload the key admits %q, want first", got)
	}
	if _, ok := h.g.Apps().Current().App("second"); ok {
		t.Error("the second app was created with a key the first holds")
	}
	if logs := h.logs.String(); !strings.Contains(logs, "already held by another app") {
		t.Errorf("the refusal is not logged:\n%s", logs)
	}
}
