package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/ratelimit"
)

// recordingLimits is a SharedLimits that records what it is asked and
// answers a fixed decision: the contract between the request path and a
// shared store (package clusterlimit is tested against real Redis, and the
// gateway's cluster tests run both together).
type recordingLimits struct {
	calls    [][]ratelimit.Check
	sigs     []*[32]byte
	decision ratelimit.Decision
	replayed bool
}

func (s *recordingLimits) Decide(_ context.Context, checks []ratelimit.Check, sig *[32]byte, _ time.Time) (ratelimit.Decision, bool) {
	s.calls = append(s.calls, append([]ratelimit.Check(nil), checks...))
	s.sigs = append(s.sigs, sig)
	return s.decision, s.replayed
}

// TestLimitSharedChecks: the checks the request path hands a shared store
// are the in-process limiter's, in its order (the app × route limit, then
// the app's), under keys that cannot collide (app id; id NUL route; NUL
// route NUL address); a request without any limit makes no call.
func TestLimitSharedChecks(t *testing.T) {
	rt := &Route{Name: "r1", PathPrefix: "/", Upstream: &Upstream{Name: "up"},
		AnonymousLimit: ratelimit.Policy{Rate: mustPolicyRate(t, 1, 2)}}
	h := newTestHandler(t, []*Route{rt}, []*Upstream{rt.Upstream})
	rec := &recordingLimits{decision: ratelimit.Decision{Allowed: true, Limit: 5, Remaining: 4}}
	h.consumers.shared = rec
	appLimit := ratelimit.Policy{Rate: mustPolicyRate(t, 10, 5)}
	routeLimit := ratelimit.Policy{Rate: mustPolicyRate(t, 1, 1)}
	apps := NewApps([]*App{
		{ID: "a", Grants: map[string]bool{"r1": true}, Limit: appLimit, RouteLimits: map[string]ratelimit.Policy{"r1": routeLimit}},
		{ID: "free", Grants: map[string]bool{"r1": true}},
	}, nil, nil)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "[::ffff:192.0.2.7]:4000"

	d, limited, replayed := h.limitShared(r, r.RemoteAddr, rt, apps.App("a"), nil, time.Now())
	want := []ratelimit.Check{{Key: "a\x00r1", Policy: routeLimit}, {Key: "a", Policy: appLimit}}
	if !limited || replayed || d != rec.decision || !reflect.DeepEqual(rec.calls[0], want) {
		t.Fatalf("app: limited %v replayed %v d %+v checks %+v, want %+v", limited, replayed, d, rec.calls[0], want)
	}
	h.limitShared(r, r.RemoteAddr, rt, nil, nil, time.Now())
	if want := []ratelimit.Check{{Key: "\x00r1\x00192.0.2.7", Policy: rt.AnonymousLimit}}; !reflect.DeepEqual(rec.calls[1], want) {
		t.Fatalf("anonymous: checks %+v, want %+v", rec.calls[1], want)
	}
	if _, limited, _ := h.limitShared(r, r.RemoteAddr, rt, apps.App("free"), nil, time.Now()); limited || len(rec.calls) != 2 {
		t.Fatalf("an app without limits: limited %v, %d calls; want no call", limited, len(rec.calls))
	}
	sig := &[32]byte{9}
	rec.replayed = true
	if _, limited, replayed := h.limitShared(r, r.RemoteAddr, rt, apps.App("free"), sig, time.Now()); !replayed || limited || rec.sigs[2] != sig {
		t.Fatalf("a signature without limits: limited %v replayed %v; want one call with the signature, replayed", limited, replayed)
	}
}

func mustPolicyRate(t *testing.T, perSecond float64, burst int64) ratelimit.Rate {
	t.Helper()
	r, err := ratelimit.NewRate(perSecond, burst)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
