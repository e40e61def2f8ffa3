package health

import (
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

// TestEndpointViewsMatchView: the views of a page of addresses are View's
// for those addresses (slow start, drained, healthy), in the order asked,
// with Address "" for an address or an upstream the manager does not
// know; Status is View without the endpoints.
func TestEndpointViewsMatchView(t *testing.T) {
	now := t0
	m := New(Options{Logger: quietLogger(), OnChange: func([]string) {}, Clock: nowFunc(func() time.Time { return now })})
	o := UpstreamOptions{SlowStart: 10 * time.Second}
	eps := testEndpoints(5)
	eps[1].Weight = 0
	m.Apply("u", o, eps)
	now = now.Add(time.Second)
	m.Apply("u", o, append(testEndpoints(5), endpoint.New("10.9.9.9:80", 1000))) // 1 undrained, one joins: slow start
	now = now.Add(2 * time.Second)

	full, ok := m.View("u")
	if !ok {
		t.Fatal("View: unknown upstream")
	}
	byAddr := map[string]EndpointView{}
	for _, e := range full.Endpoints {
		byAddr[e.Address] = e
	}
	addrs := []string{"10.9.9.9:80", "10.0.0.4:80", "nope:1", "10.0.0.1:80", "10.0.0.0:80"}
	got := m.EndpointViews("u", addrs, nil)
	if len(got) != len(addrs) {
		t.Fatalf("%d views for %d addresses", len(got), len(addrs))
	}
	for i, a := range addrs {
		want := byAddr[a] // the zero view for nope:1
		if got[i] != want {
			t.Errorf("%s: %+v, want %+v", a, got[i], want)
		}
	}
	if got[0].State != SlowStart || got[3].State != SlowStart || got[4].State != Healthy {
		t.Errorf("states %s %s %s, want slow_start slow_start healthy", got[0].State, got[3].State, got[4].State)
	}
	if again := m.EndpointViews("u", addrs[:2], got); len(again) != 2 || &again[0] != &got[0] {
		t.Error("EndpointViews did not reuse dst")
	}
	if v := m.EndpointViews("other", addrs[:1], nil); len(v) != 1 || v[0].Address != "" {
		t.Errorf("an unknown upstream: %+v", v)
	}
	st, ok := m.Status("u")
	if !ok || st.Endpoints != nil || st.Panic != full.Panic || st.PanicTotal != full.PanicTotal || len(st.EjectionsTotal) != len(full.EjectionsTotal) {
		t.Errorf("Status %+v, View %+v", st, full)
	}
	if _, ok := m.Status("other"); ok {
		t.Error("Status of an unknown upstream: ok")
	}
}
