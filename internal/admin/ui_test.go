package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestUIServedWithoutToken: with admin tokens, the web UI's files are
// served without one (they hold no data) with a Content-Security-Policy
// that keeps the page to its own origin, /ui redirects to /ui/, a path
// that leaves /ui/ through dot segments reaches no data without a token,
// and the UI's own API calls (summary, reloads) still need a token.
func TestUIServedWithoutToken(t *testing.T) {
	const tok = "ui-test-token-0123456789"
	o := fullOptions(t, fixedOperator{config: []byte("{}\n")}, func() []Token { return []Token{NewToken(tok, ScopeRead)} })
	h, err := NewHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for path, want := range map[string]string{"/ui/": "<title>levee admin</title>", "/ui/app.js": "sessionStorage", "/ui/app.css": "--accent"} {
		r := call(t, srv, "GET", path, "")
		if r.status != 200 || !strings.Contains(r.raw, want) {
			t.Errorf("GET %s without a token: %d, body has %q: %v", path, r.status, want, strings.Contains(r.raw, want))
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
	}
	expect(t, call(t, srv, "GET", "/ui/nothing.js", ""), 404, "")
	// The client follows the redirect; /ui ends at the page.
	if r := call(t, srv, "GET", "/ui", ""); r.status != 200 || !strings.Contains(r.raw, "<title>levee admin</title>") {
		t.Errorf("GET /ui: %d", r.status)
	}
	// Dot segments: the mux redirects to the cleaned path, which needs
	// the token; no data is ever answered under /ui/.
	req, _ := http.NewRequest("GET", srv.URL+"/ui/../api/v1/apps", nil)
	req.URL.Opaque = "/ui/../api/v1/apps" // sent as is, not cleaned by the client
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	redirect := resp.StatusCode/100 == 3 && resp.Header.Get("Location") == "/api/v1/apps"
	if !redirect && resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), `"apps"`) {
		t.Errorf("GET /ui/../api/v1/apps without a token: %d %s, want a redirect to /api/v1/apps, 401 or 404", resp.StatusCode, body)
	}
	expect(t, call(t, srv, "GET", "/ui/../api/v1/apps", ""), 401, "unauthorized") // the redirect followed
	for _, p := range []string{"/api/v1/summary", "/api/v1/reloads"} {
		expect(t, call(t, srv, "GET", p, ""), 401, "unauthorized")
		expect(t, call(t, srv, "GET", p, "", "Authorization", "Bearer "+tok), 200, "")
	}
}

// TestSummary: GET /api/v1/summary sums the registry's series: requests
// by class, 5xx as errors, refusals by reason over routes (most first,
// zeros left out), endpoints by state, the last reload.
func TestSummary(t *testing.T) {
	reg := prometheus.NewRegistry()
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "levee_requests_total", Help: "h"}, []string{"route", "upstream", "code"})
	refs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "levee_refusals_total", Help: "h"}, []string{"route", "reason"})
	eps := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "levee_upstream_endpoints", Help: "h"}, []string{"upstream", "state"})
	inflight := prometheus.NewGauge(prometheus.GaugeOpts{Name: "levee_inflight_requests", Help: "h"})
	when := prometheus.NewGauge(prometheus.GaugeOpts{Name: "levee_config_last_reload_timestamp_seconds", Help: "h"})
	ok := prometheus.NewGauge(prometheus.GaugeOpts{Name: "levee_config_last_reload_success", Help: "h"})
	reg.MustRegister(reqs, refs, eps, inflight, when, ok)
	reqs.WithLabelValues("a", "up", "200").Add(7)
	reqs.WithLabelValues("b", "up", "503").Add(2)
	reqs.WithLabelValues("", "", "502").Add(1)
	reqs.WithLabelValues("a", "up", "499").Add(1)
	refs.WithLabelValues("a", "unauthenticated").Add(3)
	refs.WithLabelValues("b", "unauthenticated").Add(1)
	refs.WithLabelValues("b", "shed").Add(5)
	refs.WithLabelValues("b", "rate_limited")
	eps.WithLabelValues("x", "healthy").Set(2)
	eps.WithLabelValues("y", "healthy").Set(1)
	eps.WithLabelValues("y", "ejected").Set(1)
	inflight.Set(4)
	at := time.Date(2026, 12, 2, 3, 0, 0, 500_000_000, time.UTC)
	when.Set(float64(at.UnixNano()) / 1e9)
	ok.Set(0)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(mfs)
	if s.Requests != 11 || s.Errors != 3 || s.Classes["2xx"] != 7 || s.Classes["5xx"] != 3 || s.Classes["4xx"] != 1 {
		t.Errorf("requests %v errors %v classes %v", s.Requests, s.Errors, s.Classes)
	}
	if len(s.Refusals) != 2 || s.Refusals[0] != (ReasonCount{"shed", 5}) || s.Refusals[1] != (ReasonCount{"unauthenticated", 4}) {
		t.Errorf("refusals %v", s.Refusals)
	}
	if s.Endpoints["healthy"] != 3 || s.Endpoints["ejected"] != 1 || s.Inflight != 4 {
		t.Errorf("endpoints %v inflight %v", s.Endpoints, s.Inflight)
	}
	if s.LastReload.Success || s.LastReload.Time.Sub(at).Abs() > time.Millisecond {
		t.Errorf("last reload %+v, want refused at %v", s.LastReload, at)
	}
	if e := summarize(nil); e.Refusals == nil || e.Classes == nil || e.Endpoints == nil {
		t.Errorf("an empty registry's summary has null lists: %+v", e)
	}
}
