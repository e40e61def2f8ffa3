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
	"github.com/prometheus/client_golang/prometheus"
)

// TestConsumerStateCollector: evictions from a full anonymous rate-limit
// table and a full HMAC replay cache show up in their series.
func TestConsumerStateCollector(t *testing.T) {
	up := &Upstream{Name: "up"} // no endpoint: 503 after the limits
	anon := &Route{Name: "anon", PathPrefix: "/anon/", Upstream: up,
		AnonymousLimit: ratelimit.Policy{Rate: mustRate(t, 1, 2)}}
	signed := &Route{Name: "all", PathPrefix: "/signed/", Upstream: up, Auth: AuthHMAC}
	h := newTestHandler(t, []*Route{anon, signed}, []*Upstream{up})
	apps, keys := benchApps(t, 1)
	h.SwapApps(NewApps(apps, mustIndex(t, keys), nil))
	// Small tables, so that a few requests fill them.
	v, err := auth.NewVerifier(auth.VerifierOptions{NonceCapacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	h.consumers.verifier = v
	if h.consumers.anonLimits, err = ratelimit.New[anonKey](ratelimit.Options{Capacity: 16}); err != nil {
		t.Fatal(err)
	}

	for i := range 40 { // 40 addresses, one request each: 24 evictions
		r := httptest.NewRequest(http.MethodGet, "/anon/x", nil)
		r.RemoteAddr = fmt.Sprintf("10.0.%d.%d:1234", i/250, i%250+1)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	sum := sha256.Sum256([]byte(benchKey(0)))
	keyID := fmt.Sprintf("%x", sum[:6])
	now := time.Now()
	for i := range 10 { // 10 signatures in a cache of 4: 6 evicted
		r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/signed/x?i=%d", i), nil)
		if err := client.Sign(r, keyID, sum[:], nil, now); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == http.StatusUnauthorized {
			t.Fatalf("signed request %d refused: %s", i, w.Body)
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(h.ConsumerStateCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			k := mf.GetName()
			for _, l := range mt.GetLabel() {
				k += "," + l.GetName() + "=" + l.GetValue() // sorted by name
			}
			if c := mt.GetCounter(); c != nil {
				got[k] = c.GetValue()
			} else {
				got[k] = mt.GetGauge().GetValue()
			}
		}
	}
	anonEvicted := got["levee_ratelimit_evictions_total,state=idle,table=anonymous"] + got["levee_ratelimit_evictions_total,state=busy,table=anonymous"]
	if anonEvicted != 24 {
		t.Errorf("anonymous evictions %v, want 24 (40 keys in a table of 16): %v", anonEvicted, got)
	}
	if got["levee_ratelimit_evictions_total,state=busy,table=anonymous"] == 0 {
		t.Errorf("every evicted key had just spent a token (busy), got none busy: %v", got)
	}
	if got["levee_ratelimit_evictions_total,state=idle,table=app"]+got["levee_ratelimit_evictions_total,state=busy,table=app"] != 0 {
		t.Errorf("app evictions without app limits: %v", got)
	}
	if got["levee_hmac_nonces"] != 4 || got["levee_hmac_nonces_evicted_total"] != 6 {
		t.Errorf("nonces %v evicted %v, want 4 and 6", got["levee_hmac_nonces"], got["levee_hmac_nonces_evicted_total"])
	}
}
