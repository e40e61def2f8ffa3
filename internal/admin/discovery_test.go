package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// discoveryGateway answers pushes and confirms with fixed outcomes.
type discoveryGateway struct {
	fakeGateway
	push    PushResult
	pushErr error
	conf    ConfirmResult
	confErr error
}

func (g discoveryGateway) PushEndpoints(context.Context, string, []byte) (PushResult, error) {
	return g.push, g.pushErr
}
func (g discoveryGateway) ConfirmUpstream(context.Context, string) (ConfirmResult, error) {
	return g.conf, g.confErr
}

// TestDiscoveryOutcomesToHTTP: each typed result and sentinel error of the
// discovery API has its one status, reason and body, set here rather than
// by the gateway.
func TestDiscoveryOutcomesToHTTP(t *testing.T) {
	rejected := []QuarantineView{{Key: "k", Reason: "bad_weight", Raw: "NaN", Message: "m"}}
	for _, c := range []struct {
		name       string
		gw         discoveryGateway
		method     string
		path       string
		status     int
		result     string // body["result"], "" for none
		reason     string // body["reason"], "" for none
		errMessage string // body["error"], "" for none
	}{
		{"push applied", discoveryGateway{push: PushResult{Instances: 2, DropFraction: 0.25, Rejected: rejected}}, "PUT", "/api/v1/upstreams/api/endpoints", 200, "applied", "", ""},
		{"push held", discoveryGateway{push: PushResult{Held: true, DropFraction: 0.75}}, "PUT", "/api/v1/upstreams/api/endpoints", 202, "held", "", ""},
		{"push refused", discoveryGateway{pushErr: &PushRefusedError{Reason: "malformed", Err: errors.New("not a list"), Rejected: rejected}}, "PUT", "/api/v1/upstreams/api/endpoints", 422, "refused", "malformed", "not a list"},
		{"push refused without a code", discoveryGateway{pushErr: &PushRefusedError{Err: errors.New("x")}}, "PUT", "/api/v1/upstreams/api/endpoints", 422, "refused", "refused", "x"},
		{"push to a static upstream", discoveryGateway{pushErr: fmt.Errorf("wrapped: %w", ErrNotPushUpstream)}, "PUT", "/api/v1/upstreams/api/endpoints", 409, "", "not_push_upstream", "upstream api does not take pushed endpoints (set discovery: {push: true})"},
		{"push fails otherwise", discoveryGateway{pushErr: errors.New("disk on fire")}, "PUT", "/api/v1/upstreams/api/endpoints", 500, "", "internal", "disk on fire"},
		{"push while the shared store is away", discoveryGateway{pushErr: fmt.Errorf("%w: etcd: timeout", ErrStoreUnavailable)}, "PUT", "/api/v1/upstreams/api/endpoints", 503, "", "store_unavailable", "the shared store cannot take changes now (no node changed); retry: the shared store is unavailable: etcd: timeout"},
		{"push too large to share", discoveryGateway{pushErr: ErrPushTooLarge}, "PUT", "/api/v1/upstreams/api/endpoints", 413, "", "body_too_large", "the pushed list is too large to share"},
		{"confirm while the shared store is away", discoveryGateway{confErr: ErrStoreUnavailable}, "POST", "/api/v1/upstreams/api/confirm", 503, "", "store_unavailable", "the shared store cannot take changes now (no node changed); retry: the shared store is unavailable"},
		{"confirm applied", discoveryGateway{conf: ConfirmResult{DropFraction: 0.6, HeldFor: 3 * time.Second}}, "POST", "/api/v1/upstreams/api/confirm", 200, "applied", "", ""},
		{"confirm without a feed", discoveryGateway{confErr: ErrNoFeed}, "POST", "/api/v1/upstreams/api/confirm", 404, "", "not_found", "upstream api has no discovery feed"},
		{"confirm with nothing held", discoveryGateway{confErr: ErrNothingHeld}, "POST", "/api/v1/upstreams/api/confirm", 409, "", "nothing_held", "nothing is held for upstream api"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := NewHandler(Options{Gateway: c.gw, Gatherer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			r := call(t, srv, c.method, c.path, "[]")
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.raw)
			}
			for key, want := range map[string]string{"result": c.result, "reason": c.reason, "error": c.errMessage} {
				if got, _ := r.body[key].(string); got != want {
					t.Errorf("body[%q] = %q, want %q (%s)", key, got, want, r.raw)
				}
			}
			if c.result == "applied" && c.method == "POST" && r.body["held_for"] != "3s" {
				t.Errorf("held_for = %v, want 3s", r.body["held_for"])
			}
			if c.status == 503 && r.header.Get("Retry-After") != "1" {
				t.Errorf("503 with Retry-After %q, want 1", r.header.Get("Retry-After"))
			}
			if c.method == "PUT" && (c.status == 200 || c.status == 202 || c.status == 422) {
				if list, ok := r.body["rejected"].([]any); !ok || len(list) != len(c.gw.push.Rejected)+len(refusedRejections(c.gw.pushErr)) {
					t.Errorf("rejected = %v (a list always, empty when none)", r.body["rejected"])
				}
			}
		})
	}
}

func refusedRejections(err error) []QuarantineView {
	var r *PushRefusedError
	if errors.As(err, &r) {
		return r.Rejected
	}
	return nil
}
