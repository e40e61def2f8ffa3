package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/testkit"
)

// rollbackYAML is a one-route configuration to address, with the
// rollback's window at 1.5 s and a verdict after 10 requests; extra is
// appended to the route.
func rollbackYAML(address, extra string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
rollback: {window: 1500ms, min_requests: 10}
upstreams:
  api:
    endpoints: [{address: %s}]
routes:
  - name: all
    match: {path_prefix: /}
    upstream: api
%s`, address, extra)
}

// rollbacksView is GET /api/v1/rollbacks as the tests read it.
type rollbacksView struct {
	ServingGood bool   `json:"serving_good"`
	Why         string `json:"why"`
	GoodDigest  string `json:"good_config_digest"`
	Versions    []struct {
		N      int    `json:"version"`
		Kind   string `json:"kind"`
		State  string `json:"state"`
		Reason string `json:"reason"`
	} `json:"versions"`
	Pins []struct {
		Version int    `json:"version"`
		Kind    string `json:"kind"`
		Subject string `json:"subject"`
	} `json:"pins"`
}

func (h *harness) rollbacks() rollbacksView {
	h.t.Helper()
	resp, err := h.client.Get(h.admin + "/api/v1/rollbacks")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v rollbacksView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 {
		h.t.Fatalf("GET /api/v1/rollbacks: %d %v", resp.StatusCode, err)
	}
	return v
}

// status GETs path and returns the status code, the body read and closed.
func (h *harness) status(path string) int {
	h.t.Helper()
	resp := h.get(path)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// untilGood sends requests until the start's configuration is judged good
// (its content saved as the last good one).
func (h *harness) untilGood() {
	h.t.Helper()
	testkit.Eventually(h.t, 10*time.Second, func() (bool, string) {
		if s := h.status("/x"); s != 200 {
			return false, fmt.Sprintf("status %d", s)
		}
		v := h.rollbacks()
		return v.GoodDigest != "", fmt.Sprintf("%+v", v)
	})
}

// TestRollbackBadReloadAcrossRestart: a valid reload that points the
// route at a closed port (every request now levee's own 502) is reverted
// within the window with no manual step, pinned, counted and shown; a
// reload of the same file is refused as pinned; a restart with the bad
// file still on disk starts from the last good configuration; unpinning
// lets the file be applied again.
func TestRollbackBadReloadAcrossRestart(t *testing.T) {
	good, _ := backend(t, "good")
	h := start(t, rollbackYAML(hostPort(good), ""))
	h.untilGood()

	h.writeConfig(rollbackYAML(closedPort(t), ""))
	changed := time.Now()
	if err := h.g.Reload(); err != nil {
		t.Fatal(err)
	}
	var bad, ok int
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		switch s := h.status("/x"); s {
		case 502:
			bad++
		case 200:
			ok++
		default:
			t.Fatalf("status %d", s)
		}
		return ok > 0 && bad > 0, fmt.Sprintf("%d 502s, %d 200s", bad, ok)
	})
	took := time.Since(changed)
	t.Logf("reverted after %d requests answered 502, %v after the reload (window 1.5s)", bad, took.Round(time.Millisecond))
	if took > 1500*time.Millisecond+time.Second {
		t.Errorf("reverted after %v, window 1.5s", took)
	}
	// Counted once the revert returns (the table swaps a moment before).
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		return h.metricIs(`levee_rollbacks_total{kind="reload"}`, 1), "levee_rollbacks_total{kind=reload} not 1"
	})
	if v := h.metric(`levee_rolled_back`); v != 1 {
		t.Errorf("levee_rolled_back = %v", v)
	}
	v := h.rollbacks()
	if !v.ServingGood || len(v.Pins) != 1 || v.Pins[0].Kind != "reload" || v.Versions[0].State != "rolled_back" {
		t.Fatalf("rollbacks %+v", v)
	}
	t.Logf("version %d: %s", v.Versions[0].N, v.Versions[0].Reason)
	ready, err := h.client.Get(h.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(ready.Body)
	ready.Body.Close()
	if !strings.Contains(string(body), "running a rolled-back configuration") {
		t.Errorf("/readyz does not say it runs a rolled-back configuration: %s", body)
	}

	// The same bad file again (a SIGHUP): refused as pinned, counted.
	if err := h.g.Reload(); !errors.Is(err, admin.ErrPinned) {
		t.Fatalf("reload of the pinned file: %v", err)
	}
	if v := h.metric(`levee_rollback_pinned_refusals_total{kind="reload"}`); v != 1 {
		t.Errorf("pinned refusals %v", v)
	}
	if s := h.status("/x"); s != 200 {
		t.Fatalf("after the refused reload: %d", s)
	}

	// Restart on the same state_dir with the bad file still on disk.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	g2, err := New(Options{Load: func() (*config.Config, error) { return config.Load(h.cfgPath) }, LogOutput: logs})
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Start(); err != nil {
		t.Fatal(err)
	}
	h.g, h.base, h.admin = g2, "http://"+g2.Addr().String(), "http://"+g2.AdminAddr().String()
	h.client = &http.Client{Transport: adminTokenTransport{g: g2, next: &http.Transport{}}, Timeout: 10 * time.Second}
	for i := 0; i < 20; i++ {
		if s := h.status("/x"); s != 200 {
			t.Fatalf("request %d after the restart: %d (the bad file served)", i, s)
		}
	}
	if !strings.Contains(logs.String(), "ROLLBACK: levee starts from its last good configuration") {
		t.Errorf("the restart did not say it runs the last good configuration:\n%s", logs.String())
	}
	if !h.rollbacks().ServingGood {
		t.Error("after the restart the admin API does not say the last good configuration serves")
	}

	// The operator unpins: the file applies again.
	req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("%s/api/v1/rollbacks/pins/%d", h.admin, v.Pins[0].Version), nil)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("unpin: %d", resp.StatusCode)
	}
	h.writeConfig(rollbackYAML(hostPort(good), `    headers: {response: {set: {X-Fixed: "1"}}}`))
	if err := g2.Reload(); err != nil {
		t.Fatalf("reload of a fixed file: %v", err)
	}
	if h.rollbacks().ServingGood {
		t.Error("still says rolled back after the fixed file applied")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := g2.Shutdown(ctx2); err != nil {
		t.Fatal(err)
	}
	h.g = nil
}

// TestRollbackKeepsHeaderReload: a reload that only adds a response header
// is kept: its window passes with every answer a 200, it is marked good,
// nothing is counted.
func TestRollbackKeepsHeaderReload(t *testing.T) {
	good, _ := backend(t, "good")
	h := start(t, rollbackYAML(hostPort(good), ""))
	h.untilGood()
	h.writeConfig(rollbackYAML(hostPort(good), `    headers: {response: {set: {X-Added: "yes"}}}`))
	if err := h.g.Reload(); err != nil {
		t.Fatal(err)
	}
	n := 0
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		resp := h.get("/x")
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		n++
		if resp.StatusCode != 200 || resp.Header.Get("X-Added") != "yes" {
			t.Fatalf("status %d, X-Added %q", resp.StatusCode, resp.Header.Get("X-Added"))
		}
		v := h.rollbacks()
		return v.Versions[0].State == "good", fmt.Sprintf("%+v", v.Versions)
	})
	t.Logf("header reload judged good after %d requests", n)
	if v := h.metric(`levee_rollbacks_total{kind="reload"}`); v != 0 {
		t.Errorf("levee_rollbacks_total{kind=reload} = %v", v)
	}
	if v := h.rollbacks(); v.ServingGood || len(v.Pins) != 0 {
		t.Errorf("rollbacks %+v", v)
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(h.cfgPath), "state", "rollback", "good.yaml"))
	if err != nil || !strings.Contains(string(data), "X-Added") {
		t.Errorf("the header reload is not the last good configuration: %v %s", err, data)
	}
}

// badQueryDef is a data-API definition whose query config accepts but the
// database refuses at every request (a column the table lacks).
func badQueryDef(prefix string) string {
	return fmt.Sprintf(`{"match": {"path_prefix": %q}, "data": {"source": "sales",
		"sql": "SELECT id, no_such_column AS v FROM orders WHERE customer_id = :customer_id ORDER BY id",
		"params": {"customer_id": {"type": "int64", "required": true, "min": 1}}}}`, prefix)
}

// dataStatus GETs a data API's path for customer 1 and returns the status
// and the version that answered (0 unless 200).
func (in *instance) dataStatus(path string) (int, int) {
	in.t.Helper()
	resp, err := http.Get("http://" + in.g.Addr().String() + path + "?customer_id=1")
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return resp.StatusCode, 0
	}
	var page jsonPage
	if err := json.Unmarshal(body, &page); err != nil || len(page.Rows) == 0 {
		in.t.Fatalf("GET %s: %s (%v)", path, body, err)
	}
	return 200, int(page.Rows[0]["v"].(float64))
}

// TestRollbackBadDataAPIVersion: a published data-API version whose query
// fails at the database (embedded SQLite; every request levee's own 502)
// is taken back to the version that served before within the window,
// pinned (publishing it again is 409 pinned) and counted; a first publish
// that fails is taken offline.
func TestRollbackBadDataAPIVersion(t *testing.T) {
	dbPath, _ := sqliteOrders(t)
	web, _ := backend(t, "web")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "levee.yaml")
	yaml := lifecycleYAML(dbPath, filepath.Join(dir, "state"), hostPort(web), "") + "rollback: {window: 1500ms, min_requests: 10}\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	in := launch(t, cfgPath, "")
	defer func() { in.stop() }()

	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "orders-rt", `+versionDef("/v1/rt", 1)[1:], 201, "")
	in.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", "", 200, "")
	in.expectAPI("POST", "/api/v1/data-apis/orders-rt/versions", badQueryDef("/v1/rt"), 201, "")
	changed := time.Now()
	in.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", `{"version": 2}`, 200, "")
	var bad int
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		status, v := in.dataStatus("/v1/rt")
		if status != 200 {
			if status != 502 {
				t.Fatalf("status %d", status)
			}
			bad++
			return false, fmt.Sprintf("%d 502s", bad)
		}
		return v == 1, fmt.Sprintf("version %d serves", v)
	})
	took := time.Since(changed)
	t.Logf("data-API version 2 taken back to 1 after %d answers 502, %v after the publish", bad, took.Round(time.Millisecond))
	if bad == 0 {
		t.Error("the bad version never served: the test proves nothing")
	}
	a := in.expectAPI("GET", "/api/v1/data-apis/orders-rt", "", 200, "")
	if a["published_version"] != 1.0 || a["state"] != "published" {
		t.Fatalf("after the rollback: %v", a)
	}
	in.expectAPI("POST", "/api/v1/data-apis/orders-rt/publish", `{"version": 2}`, 409, "pinned")
	_, doc := in.api("GET", "/api/v1/rollbacks", "")
	pins, _ := doc["pins"].([]any)
	if len(pins) != 1 || pins[0].(map[string]any)["kind"] != "data_api" || pins[0].(map[string]any)["subject"] != "orders-rt" { // version 1's publish is not blamed
		t.Fatalf("pins %v", doc["pins"])
	}

	// A first publish that fails goes offline.
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "fresh", `+badQueryDef("/v1/fresh")[1:], 201, "")
	in.expectAPI("POST", "/api/v1/data-apis/fresh/publish", "", 200, "")
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		status, _ := in.dataStatus("/v1/fresh")
		return status == 404, fmt.Sprintf("status %d", status)
	})
	a = in.expectAPI("GET", "/api/v1/data-apis/fresh", "", 200, "")
	if a["state"] != "offline" {
		t.Fatalf("fresh: %v", a)
	}
	// The revert's effect is seen before it is counted (the pin is
	// written between): poll the counter.
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		resp, err := http.Get(in.admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		v := testkit.Parse(t, string(page)).Value(t, `levee_rollbacks_total{kind="data_api"}`)
		return v == 2, fmt.Sprintf("levee_rollbacks_total{kind=data_api} = %v, want 2", v)
	})
}
