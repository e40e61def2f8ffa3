package proxy

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/client"
	"github.com/levee-gw/levee/internal/auth"
)

// identified counts identifyAs's requests, so that no two signed ones
// are alike (a second would be a replay).
var identified atomic.Int64

// identifyAs runs identify for a request on a route with mode, its
// credentials made by sign, and returns the app's id or the refusal.
func identifyAs(t *testing.T, h *Handler, mode AuthMode, sign func(r *http.Request)) string {
	t.Helper()
	rt := &Route{Name: "all", PathPrefix: "/", Upstream: &Upstream{Name: "up"}, Auth: mode}
	r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/x?n=%d", identified.Add(1)), nil)
	sign(r)
	var x exchange
	app, reason, detail := h.identify(r, &x, rt, h.Apps(), time.Now())
	if app == nil {
		return string(reason) + " " + detail
	}
	return app.ID
}

func withKey(key string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("X-Api-Key", key) }
}

func signedBy(t *testing.T, key string) func(*http.Request) {
	return func(r *http.Request) {
		sum := sha256.Sum256([]byte(key))
		if err := client.Sign(r, fmt.Sprintf("%x", sum[:6]), sum[:], nil, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSharedKeyAdmitsNoApp: a key digest two apps hold admits neither,
// as an API key or as a signing key, whatever their order; each app's own
// key still admits it. The request path once let the last app given win
// the key (app b here), where the index refuses.
func TestSharedKeyAdmitsNoApp(t *testing.T) {
	rt := &Route{Name: "all", PathPrefix: "/", Upstream: &Upstream{Name: "up"}}
	h := newTestHandler(t, []*Route{rt}, []*Upstream{rt.Upstream})
	apps, creds := benchApps(t, 2) // app-0 and app-1, each with its own key
	shared := "lvk_shared-by-two-apps"
	sum := sha256.Sum256([]byte(shared))
	for _, order := range [][]string{{"app-0", "app-1"}, {"app-1", "app-0"}} {
		all := append([]auth.Credential(nil), creds...)
		for _, id := range order {
			all = append(all, auth.Credential{AppID: id, KeyID: fmt.Sprintf("%x", sum[:6]), Digest: sum})
		}
		x, err := auth.NewIndex(all)
		if err != nil {
			t.Fatal(err)
		}
		h.SwapApps(NewApps(apps, x, h.Apps()))
		want := "unauthenticated unknown_key"
		if got := identifyAs(t, h, AuthAPIKey, withKey(shared)); got != want {
			t.Errorf("order %v: the shared key as an API key: %s, want %s", order, got, want)
		}
		if got := identifyAs(t, h, AuthHMAC, signedBy(t, shared)); got != want {
			t.Errorf("order %v: signed with the shared key: %s, want %s", order, got, want)
		}
		for i := range 2 {
			if got := identifyAs(t, h, AuthAPIKey, withKey(benchKey(i))); got != apps[i].ID {
				t.Errorf("order %v: app %d's own key: %s", order, i, got)
			}
			if got := identifyAs(t, h, AuthHMAC, signedBy(t, benchKey(i))); got != apps[i].ID {
				t.Errorf("order %v: signed with app %d's own key: %s", order, i, got)
			}
		}
	}
}

// TestKeyOfAppLeftOut: a key in the index whose app is not in the
// snapshot (the gateway leaves out an app whose limits it cannot build)
// authenticates no one, and no index at all admits no one.
func TestKeyOfAppLeftOut(t *testing.T) {
	rt := &Route{Name: "all", PathPrefix: "/", Upstream: &Upstream{Name: "up"}}
	h := newTestHandler(t, []*Route{rt}, []*Upstream{rt.Upstream})
	apps, creds := benchApps(t, 2)
	h.SwapApps(NewApps(apps[:1], mustIndex(t, creds), nil))
	if got := identifyAs(t, h, AuthAPIKey, withKey(benchKey(0))); got != "app-0" {
		t.Errorf("app-0's key: %s", got)
	}
	if got := identifyAs(t, h, AuthAPIKey, withKey(benchKey(1))); got != "unauthenticated unknown_key" {
		t.Errorf("the key of an app left out, as an API key: %s", got)
	}
	if got := identifyAs(t, h, AuthHMAC, signedBy(t, benchKey(1))); got != "unauthenticated unknown_key" {
		t.Errorf("the key of an app left out, signing: %s", got)
	}
	var none *auth.Index
	for _, ids := range []Identities{nil, none} {
		h.SwapApps(NewApps(apps, ids, nil))
		if got := identifyAs(t, h, AuthAPIKey, withKey(benchKey(0))); got != "unauthenticated unknown_key" {
			t.Errorf("no index (%T): %s", ids, got)
		}
		if got := identifyAs(t, h, AuthHMAC, signedBy(t, benchKey(0))); got != "unauthenticated unknown_key" {
			t.Errorf("no index (%T), signing: %s", ids, got)
		}
	}
}
