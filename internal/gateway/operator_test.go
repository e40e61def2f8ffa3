package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/demo"
)

// startDemo starts levee on the configuration `levee demo` serves, with
// its real backends and SQLite database (stopped with the test), and
// returns it with that configuration.
func startDemo(t *testing.T) (*harness, string) {
	t.Helper()
	b, err := demo.StartBackends()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	dir := t.TempDir()
	dbPath, err := demo.CreateDatabase(dir)
	if err != nil {
		t.Fatal(err)
	}
	yaml := string(demo.Config("127.0.0.1:0", "127.0.0.1:0", filepath.Join(dir, "state"), dbPath, b, false))
	return start(t, yaml), yaml
}

// adminGet fetches path from h's admin listener and decodes the JSON
// answer into v; it returns the raw body.
func adminGet(t *testing.T, h *harness, path string, v any) []byte {
	t.Helper()
	resp, err := h.client.Get(h.admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, raw)
	}
	if v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, raw)
		}
	}
	return raw
}

// TestOperatorViewsOfTheDemo: on the demo's configuration (proxied and
// data routes, an app with a key digest), GET /api/v1/config is the
// effective configuration (it parses back, the digest redacted) and
// follows a reload; GET /api/v1/routes lists the routes in the file's
// order with their kinds, targets, limits and granted apps, including an
// app created through the API since; and the admin document is served.
func TestOperatorViewsOfTheDemo(t *testing.T) {
	h, yaml := startDemo(t)

	raw := adminGet(t, h, "/api/v1/config", nil)
	if strings.Contains(string(raw), demo.DemoKeySHA256) || !strings.Contains(string(raw), `"api_key_sha256": [
        "`+config.Redacted+`"
      ]`) {
		t.Errorf("the demo app's key digest is not redacted:\n%s", raw)
	}
	back, err := config.Parse([]byte(strings.ReplaceAll(string(raw), `"`+config.Redacted+`"`, `"`+demo.DemoKeySHA256+`"`)))
	if err != nil {
		t.Fatalf("the effective config does not parse back: %v\n%s", err, raw)
	}
	if back.Upstreams["slow"].Timeouts.ResponseHeader != time.Second || back.Routes[4].MaxBodyBytes != 1<<20 ||
		back.DataSources["demo-db"].Limits.Max != 4 {
		t.Errorf("effective values lost: %+v %+v", back.Upstreams["slow"].Timeouts, back.Routes[4])
	}

	var routes struct{ Routes []admin.RouteView }
	adminGet(t, h, "/api/v1/routes", &routes)
	var names []string
	for _, r := range routes.Routes {
		names = append(names, r.Name+":"+r.Kind)
	}
	if got := strings.Join(names, ","); got != "orders-v1:data,customers-v1:data,slow:upstream,flaky:upstream,upload:upstream,keyed:upstream,fast:upstream" {
		t.Errorf("routes %s", got)
	}
	orders, upload, keyed := routes.Routes[0], routes.Routes[4], routes.Routes[5]
	if orders.DataSource != "demo-db" || orders.Limits.MaxBodyBytes != nil || orders.Limits.Concurrency != "adaptive" ||
		orders.Limits.MaxRows == 0 || strings.Join(orders.Match.Methods, ",") != "GET,HEAD" {
		t.Errorf("orders-v1: %+v", orders)
	}
	if upload.Upstream != "fast" || upload.Limits.MaxBodyBytes == nil || *upload.Limits.MaxBodyBytes != 1<<20 ||
		upload.Limits.Concurrency != "none" || strings.Join(upload.Match.Methods, ",") != "POST,PUT" {
		t.Errorf("upload: %+v", upload)
	}
	if keyed.Auth != "api_key" || keyed.GrantedApps != 1 || strings.Join(keyed.GrantedAppIDs, ",") != "demo-app" {
		t.Errorf("keyed: %+v", keyed)
	}

	// An app granted keyed at runtime shows at once (the store's
	// snapshot, not the file).
	resp, err := h.client.Post(h.admin+"/api/v1/apps", "application/json", strings.NewReader(`{"id":"later","grants":["keyed"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating an app: %d", resp.StatusCode)
	}
	adminGet(t, h, "/api/v1/routes", &routes)
	if k := routes.Routes[5]; k.GrantedApps != 2 || strings.Join(k.GrantedAppIDs, ",") != "demo-app,later" {
		t.Errorf("keyed after the API grant: %+v", k)
	}

	// A reload changes what /api/v1/config shows.
	h.writeConfig(strings.Replace(yaml, "timeouts: {connect: 1s, response_header: 1s}", "timeouts: {connect: 1s, response_header: 3s}", 1))
	resp, err = h.client.Post(h.admin+"/api/v1/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %d", resp.StatusCode)
	}
	var eff struct {
		Upstreams map[string]struct {
			Timeouts map[string]string `json:"timeouts"`
		} `json:"upstreams"`
	}
	adminGet(t, h, "/api/v1/config", &eff)
	if got := eff.Upstreams["slow"].Timeouts["response_header"]; got != "3s" {
		t.Errorf("slow's response_header after the reload: %q, want 3s", got)
	}

	var doc map[string]any
	adminGet(t, h, "/api/v1/admin-openapi.json", &doc)
	if _, ok := dig(doc, "paths", "/api/v1/routes", "get").(map[string]any); !ok {
		t.Errorf("the admin document lacks GET /api/v1/routes")
	}
}
