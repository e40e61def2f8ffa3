package admin

import (
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeRollbacks is a RollbackStore holding pins by version.
type fakeRollbacks struct{ pins map[int]bool }

func (f *fakeRollbacks) Rollbacks() any {
	var pins []int
	for n := range f.pins {
		pins = append(pins, n)
	}
	return map[string]any{"pins": pins}
}

func (f *fakeRollbacks) Unpin(n int) (any, error) {
	if !f.pins[n] {
		return nil, ErrNotPinned
	}
	delete(f.pins, n)
	return map[string]int{"version": n}, nil
}

// TestRollbackRoutes: the view is read with a read token, unpinning needs
// the write scope and answers 200, 404 for a version without a pin, 400 for
// a version that is no number; POST .../unpin does what DELETE does.
func TestRollbackRoutes(t *testing.T) {
	store := &fakeRollbacks{pins: map[int]bool{3: true, 4: true}}
	h, err := NewHandler(Options{Gateway: fakeGateway{}, Gatherer: prometheus.NewRegistry(), Rollbacks: store,
		Tokens: func() []Token { return []Token{NewToken("r-token", ScopeRead), NewToken("w-token", ScopeWrite)} }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	expect(t, call(t, srv, "GET", "/api/v1/rollbacks", "", "Authorization", "Bearer r-token"), 200, "")
	expect(t, call(t, srv, "DELETE", "/api/v1/rollbacks/pins/3", "", "Authorization", "Bearer r-token"), 403, "insufficient_scope")
	expect(t, call(t, srv, "DELETE", "/api/v1/rollbacks/pins/3", "", "Authorization", "Bearer w-token"), 200, "")
	expect(t, call(t, srv, "DELETE", "/api/v1/rollbacks/pins/3", "", "Authorization", "Bearer w-token"), 404, "not_found")
	expect(t, call(t, srv, "POST", "/api/v1/rollbacks/pins/4/unpin", "", "Authorization", "Bearer w-token"), 200, "")
	expect(t, call(t, srv, "DELETE", "/api/v1/rollbacks/pins/x", "", "Authorization", "Bearer w-token"), 400, "invalid_version")
	if len(store.pins) != 0 {
		t.Errorf("pins left: %v", store.pins)
	}
}
