package proxy

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/levee-gw/levee/client"
	"github.com/levee-gw/levee/internal/auth"
	"github.com/levee-gw/levee/internal/ratelimit"
)

// benchKey is the plaintext API key of bench app i.
func benchKey(i int) string { return fmt.Sprintf("lvk_bench-app-%08d-abcdefghijklmnop", i) }

// benchApps makes n apps, each with one key and a grant to route "all".
func benchApps(tb testing.TB, n int) ([]*App, []auth.Credential) {
	tb.Helper()
	apps := make([]*App, n)
	keys := make([]auth.Credential, n)
	for i := range n {
		id := fmt.Sprintf("app-%d", i)
		apps[i] = &App{ID: id, Grants: map[string]bool{"all": true}}
		sum := sha256.Sum256([]byte(benchKey(i)))
		keys[i] = auth.Credential{Digest: sum, KeyID: fmt.Sprintf("%x", sum[:6]), AppID: id}
	}
	return apps, keys
}

// mustIndex builds the identity index of creds, as the app store does.
func mustIndex(tb testing.TB, creds []auth.Credential) *auth.Index {
	tb.Helper()
	x, err := auth.NewIndex(creds)
	if err != nil {
		tb.Fatal(err)
	}
	return x
}

func mustRate(tb testing.TB, perSecond float64, burst int64) ratelimit.Rate {
	tb.Helper()
	r, err := ratelimit.NewRate(perSecond, burst)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func benchHandler(b *testing.B, auth AuthMode) (*Handler, *Route) {
	b.Helper()
	rt := &Route{Name: "all", PathPrefix: "/", Upstream: &Upstream{Name: "up"}, Auth: auth}
	h := newTestHandler(b, []*Route{rt}, []*Upstream{rt.Upstream})
	apps, keys := benchApps(b, 100_000)
	apps[7].Limit = ratelimit.Policy{Rate: mustRate(b, 1e9, 1e9)}
	h.SwapApps(NewApps(apps, mustIndex(b, keys), nil))
	return h, rt
}

// BenchmarkIdentifyAPIKey: authenticating an API key (extract, SHA-256,
// lookup among 100,000 apps' keys, grant check).
func BenchmarkIdentifyAPIKey(b *testing.B) {
	h, rt := benchHandler(b, AuthAPIKey)
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header.Set("X-Api-Key", benchKey(99_999))
	apps := h.Apps()
	now := time.Now()
	var x exchange
	b.ReportAllocs()
	for b.Loop() {
		if app, reason, _ := h.identify(req, &x, rt, apps, now); app == nil {
			b.Fatalf("refused: %s", reason)
		}
	}
}

// BenchmarkIdentifyHMAC: verifying a signed bodiless request, replay
// cache included: the signatures (distinct, since a replay is refused)
// are made beforehand; every 16,384 the cache is renewed, off the clock.
func BenchmarkIdentifyHMAC(b *testing.B) {
	h, rt := benchHandler(b, AuthHMAC)
	sum := sha256.Sum256([]byte(benchKey(42)))
	keyID := fmt.Sprintf("%x", sum[:6])
	const n = 1 << 14
	reqs := make([]*http.Request, n)
	base := time.Now()
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/x?i=%d", i), nil)
		if err := client.Sign(r, keyID, sum[:], nil, base); err != nil {
			b.Fatal(err)
		}
		reqs[i] = r
	}
	apps := h.Apps()
	i := 0
	var x exchange
	b.ReportAllocs()
	for b.Loop() {
		if i == n {
			b.StopTimer()
			h.consumers, _ = newConsumerState() // a fresh replay cache
			i = 0
			b.StartTimer()
		}
		if app, reason, detail := h.identify(reqs[i], &x, rt, apps, base); app == nil {
			b.Fatalf("refused: %s %s", reason, detail)
		}
		i++
	}
}

// BenchmarkRateLimitDecision: one app's rate-limit decision on the request
// path (key lookup in the bounded store, GCRA).
func BenchmarkRateLimitDecision(b *testing.B) {
	h, rt := benchHandler(b, AuthAPIKey)
	app := h.Apps().App("app-7")
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if d, limited := h.limit(req.RemoteAddr, rt, app, now); !limited || !d.Allowed {
			b.Fatal("refused")
		}
	}
}
