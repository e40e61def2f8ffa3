package gateway

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/h1server"
	"github.com/levee-gw/levee/internal/testkit"
)

// adminCall sends method path with body to the admin API and returns the
// status and the answer.
func (h *harness) adminCall(method, path, body string) (int, string) {
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
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// untilReverted sends requests to path until at least one failed (502 or
// 503) and then one answered 200 again (the revert), within 10 s, and
// returns the failures seen.
func (h *harness) untilReverted(path string) int {
	h.t.Helper()
	var bad, ok int
	testkit.Eventually(h.t, 10*time.Second, func() (bool, string) {
		switch s := h.status(path); s {
		case 502, 503:
			bad++
		case 200:
			if bad > 0 {
				ok++
			}
		default:
			h.t.Fatalf("status %d", s)
		}
		return ok > 0, fmt.Sprintf("%d failures, %d 200s after them", bad, ok)
	})
	return bad
}

// pinOf waits (the revert serves before the pin and the version's state
// are written) for kind and subject's pin, its version rolled_back, and
// returns that version.
func (h *harness) pinOf(kind, subject string) int {
	h.t.Helper()
	pinned := 0
	testkit.Eventually(h.t, 10*time.Second, func() (bool, string) {
		v := h.rollbacks()
		for _, p := range v.Pins {
			if p.Kind == kind && p.Subject == subject {
				for _, ver := range v.Versions {
					if ver.N == p.Version && ver.State == "rolled_back" {
						pinned = p.Version
						return true, ""
					}
				}
			}
		}
		return false, fmt.Sprintf("no %s pin on %s with its version rolled_back: %+v", kind, subject, v)
	})
	return pinned
}

// untilKindGood sends requests to /x until the newest version of kind is
// judged good.
func (h *harness) untilKindGood(kind string) {
	h.t.Helper()
	testkit.Eventually(h.t, 10*time.Second, func() (bool, string) {
		if s := h.status("/x"); s != 200 {
			return false, fmt.Sprintf("status %d", s)
		}
		v := h.rollbacks()
		for _, ver := range v.Versions { // newest first
			if ver.Kind == kind {
				return ver.State == "good", fmt.Sprintf("%+v", ver)
			}
		}
		return false, fmt.Sprintf("%+v", v.Versions)
	})
}

// backendName returns which backend answered path (backend's X-Backend).
func (h *harness) backendName(path string) string {
	h.t.Helper()
	resp := h.get(path)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("X-Backend")
}

// TestRollbackRegistryFileUpdate: a file-registry update (kind registry)
// moving every endpoint to a dead address is reverted within the window
// with no manual step (the set served before serves again, also from the
// snapshot), its set pinned; the same set written again (in another
// order) is refused as pinned and counted; a healthy different set is
// applied; a harmless update is kept (judged good).
func TestRollbackRegistryFileUpdate(t *testing.T) {
	good, _ := backend(t, "good")
	other, _ := backend(t, "other")
	dead1, dead2 := closedPort(t), closedPort(t)
	dir := t.TempDir()
	reg := filepath.Join(dir, "instances.json")
	write := func(addrs ...string) {
		t.Helper()
		var items []string
		for _, a := range addrs {
			items = append(items, fmt.Sprintf(`{"address": %q}`, a))
		}
		tmp := reg + ".tmp"
		if err := os.WriteFile(tmp, []byte("["+strings.Join(items, ",")+"]"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, reg); err != nil {
			t.Fatal(err)
		}
	}
	write(hostPort(good))
	h := start(t, fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
rollback: {window: 1500ms, min_requests: 10}
upstreams:
  api:
    endpoints: [{address: %s}]
    discovery: {file: %s, max_drop_fraction: 1}
routes:
  - name: all
    match: {path_prefix: /}
    upstream: api
`, hostPort(good), reg))
	h.untilGood()

	write(dead1, dead2)
	changed := time.Now()
	bad := h.untilReverted("/x")
	took := time.Since(changed)
	pin := h.pinOf("registry", "upstream/api")
	t.Logf("dead set reverted after %d failures in %v (window 1.5s); pinned as version %d", bad, took.Round(time.Millisecond), pin)
	if took > 3*time.Second {
		t.Errorf("revert took %v, want within the window", took)
	}
	if n := h.metric(`levee_rollbacks_total{kind="registry"}`); n != 1 {
		t.Errorf("levee_rollbacks_total{kind=registry} = %v, want 1", n)
	}
	if got := h.backendName("/x"); got != "good" {
		t.Errorf("after the revert served by %q, want good", got)
	}

	// The same set again (another order: another file content) is refused.
	write(dead2, dead1)
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		v, ok := h.lookupMetric(`levee_rollback_pinned_refusals_total{kind="registry"}`)
		return ok && v >= 1, fmt.Sprintf("pinned refusals %v", v)
	})
	for range 20 {
		if s := h.status("/x"); s != 200 {
			t.Fatalf("a pinned set was applied: status %d", s)
		}
	}
	if !strings.Contains(h.logs.String(), "rolled back as bad") {
		t.Error("the refusal of the pinned set is not logged")
	}

	// A healthy different set is applied and kept.
	write(hostPort(other))
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		got := h.backendName("/x")
		return got == "other", "served by " + got
	})
	h.untilKindGood("registry")
	if n := h.metric(`levee_rollbacks_total{kind="registry"}`); n != 1 {
		t.Errorf("a harmless update was rolled back: levee_rollbacks_total{kind=registry} = %v", n)
	}
}

// TestRollbackAdminPushAndSplit: an admin push (kind admin) of dead
// endpoints is reverted and pinned, pushing it again answers 409 pinned,
// a different healthy push applies; an admin split change sending every
// request to a dead upstream is reverted to the weights before, and the
// same weights again answer 409 pinned.
func TestRollbackAdminPushAndSplit(t *testing.T) {
	good, _ := backend(t, "good")
	other, _ := backend(t, "other")
	dead := closedPort(t)
	h := start(t, fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
rollback: {window: 1500ms, min_requests: 10}
upstreams:
  pushed:
    discovery: {push: true, max_drop_fraction: 1}
  live:
    endpoints: [{address: %s}]
  gone:
    endpoints: [{address: %s}]
routes:
  - name: p
    match: {path_prefix: /p/}
    upstream: pushed
  - name: s
    match: {path_prefix: /s/}
    split: [{upstream: live, weight: 100}, {upstream: gone, weight: 0}]
`, hostPort(good), dead))
	push := func(addr string) (int, string) {
		return h.adminCall(http.MethodPut, "/api/v1/upstreams/pushed/endpoints", fmt.Sprintf(`[{"address": %q}]`, addr))
	}
	if code, body := push(hostPort(good)); code != 200 {
		t.Fatalf("first push: %d %s", code, body)
	}
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		s := h.status("/p/x")
		v := h.rollbacks()
		return s == 200 && v.GoodDigest != "", fmt.Sprintf("status %d, %+v", s, v.Versions)
	})

	if code, body := push(dead); code != 200 {
		t.Fatalf("dead push: %d %s", code, body)
	}
	changed := time.Now()
	bad := h.untilReverted("/p/x")
	t.Logf("dead push reverted after %d failures in %v", bad, time.Since(changed).Round(time.Millisecond))
	h.pinOf("admin", "upstream/pushed")
	if code, body := push(dead); code != 409 || !strings.Contains(body, `"pinned"`) {
		t.Errorf("the pinned set pushed again: %d %s, want 409 pinned", code, body)
	}
	if n := h.metric(`levee_rollback_pinned_refusals_total{kind="admin"}`); n != 1 {
		t.Errorf("pinned refusals{admin} = %v, want 1", n)
	}
	if code, body := push(hostPort(other)); code != 200 {
		t.Fatalf("a different set: %d %s", code, body)
	}
	if got := h.backendName("/p/x"); got != "other" {
		t.Errorf("the different set is not served: %q", got)
	}

	// The split: everything to the dead side.
	all := `{"split":[{"upstream":"live","weight":0},{"upstream":"gone","weight":100}]}`
	if code, body := h.adminCall(http.MethodPut, "/api/v1/routes/s/split", all); code != 200 {
		t.Fatalf("split change: %d %s", code, body)
	}
	changed = time.Now()
	bad = h.untilReverted("/s/x")
	t.Logf("dead split reverted after %d failures in %v", bad, time.Since(changed).Round(time.Millisecond))
	h.pinOf("admin", "split/s")
	if w := h.g.servingWeights("s"); len(w) != 2 || w[0] != 100 || w[1] != 0 {
		t.Errorf("weights after the revert %v, want [100 0]", w)
	}
	if code, body := h.adminCall(http.MethodPut, "/api/v1/routes/s/split", all); code != 409 || !strings.Contains(body, `"pinned"`) {
		t.Errorf("the pinned weights again: %d %s, want 409 pinned", code, body)
	}
	if n := h.metric(`levee_rollbacks_total{kind="admin"}`); n != 2 {
		t.Errorf("levee_rollbacks_total{kind=admin} = %v, want 2", n)
	}
}

// TestRollbackPanics: a reload after which a route's requests panic is
// reverted on the panics alone (the panicking requests are no 5xx). The
// trigger is test-only: the data listener's handler is wrapped (through
// newH1Server) to panic on /boom/ while the serving table has a route
// named "boom", which the bad reload adds; levee has no route that
// panics by configuration.
func TestRollbackPanics(t *testing.T) {
	var gw atomic.Pointer[Gateway]
	newH1Server = func(o h1server.Options) (*h1server.Server, error) {
		next := o.Handler
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if g := gw.Load(); g != nil && strings.HasPrefix(r.URL.Path, "/boom/") {
				for _, rt := range g.handler.Table().Routes() {
					if rt.Name == "boom" {
						panic("test: route boom panics")
					}
				}
			}
			next.ServeHTTP(w, r)
		})
		return h1server.New(o)
	}
	t.Cleanup(func() { newH1Server = h1server.New })
	good, _ := backend(t, "good")
	h := start(t, rollbackYAML(hostPort(good), ""))
	gw.Store(h.g)
	h.untilGood()

	h.writeConfig(rollbackYAML(hostPort(good), `  - name: boom
    match: {path_prefix: /boom/}
    upstream: api
`))
	if err := h.g.Reload(); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	var panics int
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		resp, err := h.client.Get(h.base + "/boom/x")
		if err != nil {
			panics++ // the connection closed by the recovered panic
			return false, err.Error()
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200 && panics > 0, fmt.Sprintf("status %d after %d panics", resp.StatusCode, panics)
	})
	t.Logf("panicking reload reverted after %d panics in %v", panics, time.Since(changed).Round(time.Millisecond))
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		v := h.rollbacks()
		for _, ver := range v.Versions {
			if ver.Kind == "reload" && ver.State == "rolled_back" && strings.Contains(ver.Reason, "panic") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no reload rolled back for panics: %+v", v.Versions)
	})
	if n := h.metric(`levee_rollbacks_total{kind="reload"}`); n != 1 {
		t.Errorf("levee_rollbacks_total{kind=reload} = %v, want 1", n)
	}
}
