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

// TestRollbackStartWaitsForDiscovery (issue 28 loose end): a start whose
// only upstream is file-discovered, with no static endpoints, answers 503
// until its registry delivers; those are its own startup answers, not
// harm: once the registry file appears the start is judged good (its
// configuration becomes the last good one) and nothing is rolled back.
func TestRollbackStartWaitsForDiscovery(t *testing.T) {
	up, _ := backend(t, "up")
	reg := filepath.Join(t.TempDir(), "instances.json")
	if err := os.WriteFile(reg, []byte("not a list yet"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
rollback: {window: 1500ms, min_requests: 10}
upstreams:
  api:
    discovery: {file: %s, max_drop_fraction: 1}
routes:
  - name: all
    match: {path_prefix: /}
    upstream: api
`, reg))
	for i := range 30 { // more than min_requests, all levee's own 503s
		if s := h.status("/x"); s != 503 {
			t.Fatalf("request %d before the registry delivered: %d, want 503", i, s)
		}
	}
	tmp := reg + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf(`[{"address": %q}]`, hostPort(up))), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, reg); err != nil {
		t.Fatal(err)
	}
	h.untilGood() // served, and the start's configuration recorded as the last good one
	if n := h.metric(`levee_rollbacks_total{kind="reload"}`); n != 0 {
		t.Errorf("levee_rollbacks_total{kind=reload} = %v, want 0", n)
	}
	v := h.rollbacks()
	if v.ServingGood || len(v.Pins) != 0 {
		t.Fatalf("rollbacks after the start: %+v", v)
	}
	for _, ver := range v.Versions {
		if ver.State != "good" {
			t.Errorf("version %d (%s) is %s, want good: %s", ver.N, ver.Kind, ver.State, ver.Reason)
		}
	}
}

// TestRollbackPanicsHTTP2 (issue 28 loose end): TestRollbackPanics over
// HTTP/2 (h2c, prior knowledge), which the net/http fallback serves: a
// reload after which a route's requests panic there is reverted on the
// panics alone. The trigger is test-only, as in TestRollbackPanics: the
// fallback's handler is wrapped (through newH1Server) to panic on /boom/
// while the serving table has a route named "boom".
func TestRollbackPanicsHTTP2(t *testing.T) {
	var gw atomic.Pointer[Gateway]
	newH1Server = func(o h1server.Options) (*h1server.Server, error) {
		next := o.Fallback.Handler
		o.Fallback.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if g := gw.Load(); g != nil && strings.HasPrefix(r.URL.Path, "/boom/") {
				for _, rt := range g.handler.Table().Routes() {
					if rt.Name == "boom" {
						panic("test: route boom panics on the net/http path")
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

	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	defer tr.CloseIdleConnections()
	h2 := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	get := func(path string) (int, error) {
		resp, err := h2.Get(h.base + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.ProtoMajor != 2 {
			t.Fatalf("GET %s answered over HTTP/%d, want 2", path, resp.ProtoMajor)
		}
		return resp.StatusCode, nil
	}
	if s, err := get("/boom/x"); err != nil || s != 200 {
		t.Fatalf("before the reload: %d %v", s, err)
	}
	h.writeConfig(rollbackYAML(hostPort(good), `  - name: boom
    match: {path_prefix: /boom/}
    upstream: api
`))
	if err := h.g.Reload(); err != nil {
		t.Fatal(err)
	}
	var panics int
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		s, err := get("/boom/x")
		if err != nil {
			panics++ // the stream reset by the recovered panic
			return false, err.Error()
		}
		return s == 200 && panics > 0, fmt.Sprintf("status %d after %d panics", s, panics)
	})
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		for _, ver := range h.rollbacks().Versions {
			if ver.Kind == "reload" && ver.State == "rolled_back" && strings.Contains(ver.Reason, "panic") {
				return true, ""
			}
		}
		return false, "no reload rolled back for panics"
	})
}
