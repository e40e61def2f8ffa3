package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// splitYAML is a route api split between upstreams blue and green (each
// one switchBackend, checked every 200ms) with the given weights and
// extra route lines.
func splitYAML(blue, green *switchBackend, wBlue, wGreen int, extra string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  blue:
    endpoints: [{address: %s}]
    health_check: {http: {path: /healthz}, interval: 200ms, timeout: 150ms}
  green:
    endpoints: [{address: %s}]
    health_check: {http: {path: /healthz}, interval: 200ms, timeout: 150ms}
routes:
  - name: api
    split: [{upstream: blue, weight: %d}, {upstream: green, weight: %d}]
%s`, blue.addr, green.addr, wBlue, wGreen, extra)
}

// startSplit starts levee on yaml and waits until both sides serve (an
// active check's first result may lag the start).
func startSplit(t *testing.T, yaml string) *harness {
	h := start(t, yaml)
	waitFor(t, "both sides serving", func() bool {
		tb := h.g.handler.Table()
		return !tb.Upstream("blue").Balance().Down && !tb.Upstream("green").Balance().Down
	})
	return h
}

// sides sends n requests from 8 clients (hdr: header pairs for every
// request) and counts the answers by the X-Backend that served them; any
// answer but 200 is counted under "status NNN".
func sides(h *harness, n int, hdr ...string) map[string]int {
	h.t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				req, _ := http.NewRequest(http.MethodGet, h.base+"/x", nil)
				for i := 0; i+1 < len(hdr); i += 2 {
					req.Header.Set(hdr[i], hdr[i+1])
				}
				resp, err := h.client.Do(req)
				key := ""
				if err != nil {
					key = "error"
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					key = resp.Header.Get("X-Backend")
					if resp.StatusCode != 200 {
						key = fmt.Sprintf("status %d", resp.StatusCode)
					}
				}
				mu.Lock()
				got[key]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return got
}

// within checks that got is want ± 2 % of n.
func within(t *testing.T, what string, got, want, n int) {
	t.Helper()
	if math.Abs(float64(got-want)) > 0.02*float64(n) {
		t.Errorf("%s: %d of %d, want %d ± 2 %%", what, got, n, want)
	}
}

// TestSplitWeights: 10,000 requests over sockets on a 90/10 split land
// within ±2 % of the weights (the smooth order makes them exact), and the
// split's metric counts each side.
func TestSplitWeights(t *testing.T) {
	blue, green := newSwitchBackend(t, "blue"), newSwitchBackend(t, "green")
	h := startSplit(t, splitYAML(blue, green, 90, 10, ""))
	const n = 10000
	got := sides(h, n)
	t.Logf("90/10 split over %d requests: %v", n, got)
	within(t, "blue", got["blue"], 9000, n)
	within(t, "green", got["green"], 1000, n)
	if got["blue"]+got["green"] != n {
		t.Errorf("answers %v: some were not 200 from a side", got)
	}
	if v := h.metric(`levee_route_split_requests_total{route="api",upstream="green"}`); v != float64(got["green"]) {
		t.Errorf("levee_route_split_requests_total green = %v, want %d", v, got["green"])
	}
	if v := h.metric(`levee_requests_total{code="200",route="api",upstream="blue"}`); v != float64(got["blue"]) {
		t.Errorf("levee_requests_total blue = %v, want %d (each side keeps its own metrics)", v, got["blue"])
	}
}

// TestSplitSticky: by header and by cookie, each of 50 clients stays on
// one side over 10 requests while both are healthy, and both sides get
// clients; a request without the key gets a weighted pick.
func TestSplitSticky(t *testing.T) {
	for _, tc := range []struct{ name, sticky, hdr string }{
		{"header", "{header: x-user}", "X-User"},
		{"cookie", "{cookie: uid}", "Cookie"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blue, green := newSwitchBackend(t, "blue"), newSwitchBackend(t, "green")
			h := startSplit(t, splitYAML(blue, green, 50, 50, "    split_sticky: "+tc.sticky+"\n"))
			perSide := map[string]int{}
			for u := range 50 {
				val := fmt.Sprintf("user-%d", u)
				if tc.hdr == "Cookie" {
					val = "theme=dark; uid=" + val
				}
				got := sides(h, 10, tc.hdr, val)
				if len(got) != 1 {
					t.Fatalf("client %d changed sides (or failed): %v", u, got)
				}
				for side := range got {
					perSide[side]++
				}
			}
			t.Logf("50 sticky clients by %s: %v", tc.name, perSide)
			if perSide["blue"] < 10 || perSide["green"] < 10 {
				t.Errorf("clients per side %v: the hash does not spread 50/50", perSide)
			}
			if got := sides(h, 1000); got["blue"] != 500 || got["green"] != 500 {
				t.Errorf("requests without the key: %v, want a weighted 500/500", got)
			}
		})
	}
}

// TestSplitSideDown: green's endpoint stops (connects refused); once it
// is detected (its upstream Down), every request goes to blue with no
// failure, sticky clients of green included; when green is back, its
// share returns.
func TestSplitSideDown(t *testing.T) {
	blue, green := newSwitchBackend(t, "blue"), newSwitchBackend(t, "green")
	h := startSplit(t, splitYAML(blue, green, 50, 50, "    split_sticky: {header: x-user}\n"))
	if got := sides(h, 100); got["green"] != 50 {
		t.Fatalf("before: %v, want 50 on green", got)
	}
	green.stop()
	down := func() bool { return h.g.handler.Table().Upstream("green").Balance().Down }
	waitFor(t, "green detected down", down)
	got := sides(h, 1000)
	t.Logf("green down, 1000 requests: %v", got)
	if got["blue"] != 1000 {
		t.Errorf("green down: %v, want all 1000 on blue with no failure", got)
	}
	for u := range 20 {
		if got := sides(h, 5, "X-User", fmt.Sprintf("user-%d", u)); got["blue"] != 5 {
			t.Errorf("sticky client %d with green down: %v, want blue", u, got)
		}
	}
	green.restart()
	waitFor(t, "green serving again", func() bool { return !down() })
	if got := sides(h, 100); got["green"] != 50 {
		t.Errorf("green back: %v, want 50 on green", got)
	}
}

// TestSplitWeightChanges: a reload and the admin API change the weights;
// GET /api/v1/routes shows them; an admin change survives a reload that
// leaves the file's split alone and yields to one that changes it.
func TestSplitWeightChanges(t *testing.T) {
	blue, green := newSwitchBackend(t, "blue"), newSwitchBackend(t, "green")
	h := startSplit(t, splitYAML(blue, green, 90, 10, ""))
	if got := sides(h, 100); got["blue"] != 90 {
		t.Fatalf("90/10: %v", got)
	}
	h.writeConfig(splitYAML(blue, green, 0, 100, ""))
	if err := h.g.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := sides(h, 100); got["green"] != 100 {
		t.Errorf("after a reload to 0/100: %v, want all on green", got)
	}
	put := func(body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, h.admin+"/api/v1/routes/api/split", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, bad := range []struct {
		body   string
		status int
		reason string
	}{
		{`{"split":[{"upstream":"blue","weight":0},{"upstream":"green","weight":0}]}`, 400, "at least one weight must be above 0"},
		{`{"split":[{"upstream":"blue","weight":1}]}`, 400, "list every side"},
		{`{"split":[{"upstream":"red","weight":1},{"upstream":"green","weight":1}]}`, 400, `upstream \"red\" is not a side`},
		{`{"split":[{"upstream":"blue","weight":9000},{"upstream":"green","weight":1001}]}`, 400, "at most 10000"},
		{`{"split":[{"upstream":"blue","weight":1}],"extra":1}`, 400, "bad_request"},
	} {
		if status, body := put(bad.body); status != bad.status || !strings.Contains(body, bad.reason) {
			t.Errorf("PUT %s: %d %s, want %d with %q", bad.body, status, body, bad.status, bad.reason)
		}
	}
	if status, body := put(`{"split":[{"upstream":"green","weight":25},{"upstream":"blue","weight":75}]}`); status != 200 {
		t.Fatalf("PUT: %d %s", status, body)
	}
	if got := sides(h, 100); got["blue"] != 75 || got["green"] != 25 {
		t.Errorf("after PUT 75/25: %v", got)
	}
	resp, err := h.client.Get(h.admin + "/api/v1/routes")
	if err != nil {
		t.Fatal(err)
	}
	var view struct {
		Routes []struct {
			Kind  string `json:"kind"`
			Split struct {
				Sides []struct {
					Upstream string `json:"upstream"`
					Weight   int    `json:"weight"`
				} `json:"sides"`
			} `json:"split"`
		} `json:"routes"`
	}
	err = json.NewDecoder(resp.Body).Decode(&view)
	resp.Body.Close()
	if err != nil || len(view.Routes) != 1 || view.Routes[0].Kind != "split" || len(view.Routes[0].Split.Sides) != 2 ||
		view.Routes[0].Split.Sides[0].Weight != 75 || view.Routes[0].Split.Sides[1].Weight != 25 {
		t.Errorf("GET /api/v1/routes: %+v (%v), want kind split, blue 75, green 25", view, err)
	}
	if err := h.g.Reload(); err != nil { // the file's split unchanged: the admin's weights stay
		t.Fatal(err)
	}
	if got := sides(h, 100); got["blue"] != 75 {
		t.Errorf("after a reload of the same file: %v, want the admin's 75/25", got)
	}
	h.writeConfig(splitYAML(blue, green, 10, 90, ""))
	if err := h.g.Reload(); err != nil { // the file's split changed: it wins
		t.Fatal(err)
	}
	if got := sides(h, 100); got["blue"] != 10 {
		t.Errorf("after a reload to 10/90: %v, want the file's weights", got)
	}
	if status, body := put(`{"split":[{"upstream":"blue","weight":1},{"upstream":"green","weight":1}]}`); status != 200 {
		t.Errorf("PUT after reload: %d %s", status, body)
	}
	req, _ := http.NewRequest(http.MethodPut, h.admin+"/api/v1/routes/nope/split", strings.NewReader(`{"split":[{"upstream":"blue","weight":1}]}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := h.client.Do(req); err != nil || resp.StatusCode != 404 {
		t.Errorf("PUT on an unknown route: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
}
