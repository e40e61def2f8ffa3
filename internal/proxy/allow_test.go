package proxy

import (
	"net/http"
	"testing"
)

// TestMethodNotAllowedAllow: a 405 carries the Allow value the routing
// table built, and costs no allocation a 404 does not.
func TestMethodNotAllowedAllow(t *testing.T) {
	up := &Upstream{Name: "up"}
	h := newTestHandler(t, []*Route{
		{Name: "read", PathPrefix: "/items/", Methods: []string{"GET", "HEAD"}, Upstream: up},
		{Name: "write", PathPrefix: "/items/", Methods: []string{"PUT"}, Upstream: up},
	}, []*Upstream{up})
	serve := func(method, target string) *discardWriter {
		r, err := http.NewRequest(method, "http://levee.test"+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, r)
		return w
	}
	w := serve("POST", "/items/1")
	if got := w.h.Values("Allow"); len(got) != 1 || got[0] != "GET, HEAD, PUT" {
		t.Errorf("405 Allow = %q, want [\"GET, HEAD, PUT\"]", got)
	}
	if got := serve("GET", "/nowhere").h.Values("Allow"); len(got) != 0 {
		t.Errorf("404 carries Allow %q", got)
	}

	allocs := func(method, target string) float64 {
		r, err := http.NewRequest(method, "http://levee.test"+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := &discardWriter{h: http.Header{}}
		return testing.AllocsPerRun(200, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
		})
	}
	if a405, a404 := allocs("POST", "/items/1"), allocs("POST", "/nowhere"); a405 > a404 {
		t.Errorf("a 405 allocates %v times, a 404 %v: Allow must cost nothing per request", a405, a404)
	}
}
