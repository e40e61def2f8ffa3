package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/config"
)

// instance is one levee process-like lifetime: New, Start, and Stop.
type instance struct {
	t     *testing.T
	g     *Gateway
	admin string
	token string
}

// launch starts levee on cfgPath. stop must be called before the next
// launch on the same state_dir.
func launch(t *testing.T, cfgPath, token string) *instance {
	t.Helper()
	g, err := New(Options{Load: func() (*config.Config, error) { return config.Load(cfgPath) }, LogOutput: io.Discard})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := g.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return &instance{t: t, g: g, admin: "http://" + g.AdminAddr().String(), token: token}
}

func (in *instance) stop() {
	in.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := in.g.Shutdown(ctx); err != nil {
		in.t.Fatalf("Shutdown: %v", err)
	}
}

// api calls the admin API and decodes a JSON object answer.
func (in *instance) api(method, path, body string) (int, map[string]any) {
	in.t.Helper()
	req, err := http.NewRequest(method, in.admin+path, strings.NewReader(body))
	if err != nil {
		in.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := in.token; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	} else if tok := generatedToken(in.g); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok) // the token levee made (admin.token: generate)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &doc)
	return resp.StatusCode, doc
}

// call sends GET / to the data plane with an API key and returns the
// status.
func (in *instance) call(key string) int {
	in.t.Helper()
	req, _ := http.NewRequest("GET", "http://"+in.g.Addr().String()+"/", nil)
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func keyState(t *testing.T, app map[string]any, id string) (found, revoked bool) {
	t.Helper()
	keys, _ := app["keys"].([]any)
	for _, k := range keys {
		k := k.(map[string]any)
		if k["id"] == id {
			return true, k["revoked"] != nil
		}
	}
	return false, false
}

// TestAppsSurviveRestart: an app and a key created through the admin API
// survive a restart; a revocation does too; the snapshot exposes the
// active key's hash and drops the revoked one; a token guards the API;
// the file's apps are seeded and a runtime change to one is not reverted
// by the next start.
func TestAppsSurviveRestart(t *testing.T) {
	a, _ := backend(t, "a")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	const token = "restart-test-token-0123"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "levee.yaml")
	writeCfg := func(fileRate int) {
		yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token_file: %s}
state_dir: %s
upstreams:
  video: {endpoints: [{address: %s}]}
routes:
  - {name: video, match: {path_prefix: /}, upstream: video, auth: api_key}
apps:
  - {id: from-file, grants: [video], limits: {rate: %d}}
`, tokenFile, filepath.Join(dir, "state"), hostPort(a), fileRate)
		if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg(10)

	in := launch(t, cfgPath, token)
	status, doc := in.api("POST", "/api/v1/apps", `{"id":"runtime","grants":["video"],"limits":{"rate":5}}`)
	if status != 201 {
		t.Fatalf("create: %d %v", status, doc)
	}
	if status, doc = in.api("POST", "/api/v1/apps", `{"id":"bad-grant","grants":["nope"]}`); status != 422 || doc["field"] != "grants[0]" {
		t.Errorf("grant of an unknown route: %d %v", status, doc)
	}
	status, doc = in.api("POST", "/api/v1/apps/runtime/keys", "")
	if status != 201 {
		t.Fatalf("key: %d %v", status, doc)
	}
	plain, keyID := doc["key"].(string), doc["id"].(string)
	sum := sha256.Sum256([]byte(plain))
	if app, _, err := in.g.Apps().Current().Authenticate(sum); err != nil || app.ID != "runtime" {
		t.Fatalf("snapshot before restart: %v, %v", app, err)
	}
	if got := in.call(plain); got != 200 {
		t.Fatalf("the new key on the data plane: %d, want 200", got)
	}
	if status, doc = in.api("PATCH", "/api/v1/apps/from-file", `{"limits":{"rate":77}}`); status != 200 || doc["overridden"] != true {
		t.Fatalf("patch file app: %d %v", status, doc)
	}
	in.token = ""
	if status, _ = in.api("GET", "/api/v1/apps", ""); status != 401 {
		t.Errorf("no token: %d, want 401", status)
	}
	in.token = token
	in.stop()

	in = launch(t, cfgPath, token)
	status, doc = in.api("GET", "/api/v1/apps/runtime", "")
	if found, revoked := keyState(t, doc, keyID); status != 200 || !found || revoked {
		t.Fatalf("after restart: %d %v", status, doc)
	}
	if _, _, err := in.g.Apps().Current().Authenticate(sum); err != nil {
		t.Errorf("key after restart: %v", err)
	}
	if got := in.call(plain); got != 200 {
		t.Errorf("the key on the data plane after a restart: %d, want 200", got)
	}
	status, doc = in.api("GET", "/api/v1/apps/from-file", "")
	if lim := doc["limits"].(map[string]any); status != 200 || lim["rate"] != 77.0 {
		t.Errorf("runtime change to a file app reverted by a restart: %v", doc)
	}
	if status, doc = in.api("DELETE", "/api/v1/apps/runtime/keys/"+keyID, ""); status != 200 {
		t.Fatalf("revoke: %d %v", status, doc)
	}
	if _, _, err := in.g.Apps().Current().Authenticate(sum); err == nil {
		t.Error("revoked key still in the snapshot")
	}
	if got := in.call(plain); got != 401 {
		t.Errorf("a revoked key on the data plane: %d, want 401", got)
	}
	in.stop()

	// The file changes the overridden app: kept, flagged, warned.
	writeCfg(20)
	in = launch(t, cfgPath, token)
	defer in.stop()
	_, doc = in.api("GET", "/api/v1/apps/runtime", "")
	if found, revoked := keyState(t, doc, keyID); !found || !revoked {
		t.Errorf("revocation lost in a restart: %v", doc)
	}
	if _, _, err := in.g.Apps().Current().Authenticate(sum); err == nil {
		t.Error("revoked key back in the snapshot after a restart")
	}
	if got := in.call(plain); got != 401 {
		t.Errorf("a revoked key on the data plane after a restart: %d, want 401", got)
	}
	_, doc = in.api("GET", "/api/v1/apps/from-file", "")
	if lim := doc["limits"].(map[string]any); lim["rate"] != 77.0 || doc["pending_file_change"] != true {
		t.Errorf("file change over a runtime change: %v", doc)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "apps.db")); err != nil {
		t.Errorf("no apps.db under state_dir: %v", err)
	}
}

// TestAppsReloadSeeds: a reload seeds the file's new apps and a changed
// token takes effect; a reload with an unreadable token is refused whole.
func TestAppsReloadSeeds(t *testing.T) {
	a, _ := backend(t, "a")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("first-token-0123456789"), 0o600)
	base := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token_file: %s}
upstreams:
  video: {endpoints: [{address: %s}]}
routes:
  - {name: video, match: {path_prefix: /}, upstream: video}
`, tokenFile, hostPort(a))
	h := start(t, base)
	in := &instance{t: t, g: h.g, admin: h.admin, token: "first-token-0123456789"}
	if h.g.Apps().Current().Len() != 0 {
		t.Fatal("apps before any are defined")
	}
	os.WriteFile(tokenFile, []byte("second-token-0123456789"), 0o600)
	h.writeConfig(base + "apps:\n  - {id: late, grants: [video]}\n")
	if err := h.g.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.g.Apps().Current().App("late"); !ok {
		t.Error("reload did not seed the new app")
	}
	if status, _ := in.api("GET", "/api/v1/apps", ""); status != 401 {
		t.Errorf("old token after reload: %d", status)
	}
	in.token = "second-token-0123456789"
	if status, _ := in.api("GET", "/api/v1/apps/late", ""); status != 200 {
		t.Errorf("new token after reload: %d", status)
	}
	os.WriteFile(tokenFile, []byte(" \n"), 0o600)
	if err := h.g.Reload(); err == nil || !strings.Contains(err.Error(), "admin.token_file") {
		t.Errorf("reload with an empty token file: %v", err)
	}
	if status, _ := in.api("GET", "/api/v1/apps/late", ""); status != 200 {
		t.Errorf("token after a refused reload: %d", status)
	}
	if !bytes.Contains([]byte(h.logs.String()), []byte("apps seeded from the file")) {
		t.Error("no seeding log line")
	}
}
