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
