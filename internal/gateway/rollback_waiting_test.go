package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
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
