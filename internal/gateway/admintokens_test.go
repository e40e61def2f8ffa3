package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminTokenScopes: over real HTTP, a levee with a write token
// (admin.token_file) and a read token (admin.tokens) lets the read token
// scrape /metrics and read the apps, refuses its writes 403
// insufficient_scope, keeps /healthz and /readyz open; a reload swaps the
// tokens at once, and a reload whose tokens clash (one token in two files)
// is refused whole, the old tokens kept.
func TestAdminTokenScopes(t *testing.T) {
	a, _ := backend(t, "a")
	dir := t.TempDir()
	writeTok := func(name, tok string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const writeSecret, readSecret = "write-token-0123456789", "read-token-0123456789"
	wf, rf := writeTok("write", writeSecret), writeTok("read", readSecret)
	cfg := func(tokens string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token_file: %s, tokens: [%s]}
upstreams:
  video: {endpoints: [{address: %s}]}
routes:
  - {name: video, match: {path_prefix: /}, upstream: video, auth: api_key}
`, wf, tokens, hostPort(a))
	}
	h := start(t, cfg(`{file: `+rf+`, scope: read}`))
	anon := &instance{t: t, g: h.g, admin: h.admin}
	reader := &instance{t: t, g: h.g, admin: h.admin, token: readSecret}
	writer := &instance{t: t, g: h.g, admin: h.admin, token: writeSecret}

	for _, path := range []string{"/healthz", "/readyz"} {
		if status, _ := anon.api("GET", path, ""); status != 200 {
			t.Errorf("GET %s without a token: %d, want 200", path, status)
		}
	}
	if status, _ := anon.api("GET", "/api/v1/apps", ""); status != 401 {
		t.Errorf("no token: %d, want 401", status)
	}
	if status, doc := writer.api("POST", "/api/v1/apps", `{"id":"ops","grants":["video"]}`); status != 201 {
		t.Fatalf("create with the write token: %d %v", status, doc)
	}
	if status, _ := reader.api("GET", "/metrics", ""); status != 200 {
		t.Errorf("GET /metrics with the read token: %d, want 200", status)
	}
	if status, doc := reader.api("GET", "/api/v1/apps/ops", ""); status != 200 || doc["id"] != "ops" {
		t.Errorf("GET an app with the read token: %d %v", status, doc)
	}
	for _, wr := range []struct{ method, path, body string }{
		{"POST", "/api/v1/apps/ops/keys", ""},
		{"PATCH", "/api/v1/apps/ops", `{"status":"suspended"}`},
		{"POST", "/api/v1/reload", ""},
		{"DELETE", "/api/v1/apps/ops", ""},
	} {
		status, doc := reader.api(wr.method, wr.path, wr.body)
		if status != 403 || doc["reason"] != "insufficient_scope" || doc["error"] == "" {
			t.Errorf("%s %s with the read token: %d %v, want 403 insufficient_scope", wr.method, wr.path, status, doc)
		}
	}
	if status, doc := writer.api("GET", "/api/v1/apps/ops", ""); status != 200 || doc["status"] != "active" || len(doc["keys"].([]any)) != 0 {
		t.Errorf("the read token's refused writes changed the app: %d %v", status, doc)
	}

	// Reload: the read token becomes a write token.
	h.writeConfig(cfg(`{file: ` + rf + `, scope: write}`))
	if status, doc := writer.api("POST", "/api/v1/reload", ""); status != 200 {
		t.Fatalf("reload: %d %v", status, doc)
	}
	if status, doc := reader.api("POST", "/api/v1/apps/ops/keys", ""); status != 201 {
		t.Errorf("key-create with the token promoted to write: %d %v", status, doc)
	}
	// A reload whose files hold one token twice is refused whole, naming
	// the field; the tokens in force stay.
	dup := writeTok("dup", readSecret)
	h.writeConfig(cfg(`{file: ` + rf + `, scope: write}, {file: ` + dup + `, scope: read}`))
	status, doc := writer.api("POST", "/api/v1/reload", "")
	if status != 422 || !strings.Contains(fmt.Sprint(doc["problems"]), "admin.tokens[1].file: holds the same token as admin.tokens[0].file") {
		t.Errorf("reload with a token in two files: %d %v", status, doc)
	}
	if status, _ := reader.api("PATCH", "/api/v1/apps/ops", `{"name":"Ops"}`); status != 200 {
		t.Errorf("the write token after a refused reload: %d", status)
	}
}
