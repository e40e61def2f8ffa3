//go:build !race

package clusterproc

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// The helpers of the wall-clock-judged tests (built without the race
// detector, like them).

// metric is the value of the sample line starting with series on n's
// /metrics (0 when absent).
func metric(t *testing.T, n *Node, series string) float64 {
	t.Helper()
	resp, err := httpc.Get("http://" + n.Admin + "/metrics")
	if err != nil {
		t.Fatalf("%s: /metrics: %v", n.Name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			fmt.Sscanf(rest, "%g", &v)
			return v
		}
	}
	return 0
}

// call sends GET /api/x to n with key and returns the status.
func call(t *testing.T, n *Node, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+n.Data+"/api/x", nil)
	req.Header.Set("X-Api-Key", key)
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// api calls n's admin API and decodes a JSON object answer.
func api(t *testing.T, n *Node, method, path, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+n.Admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", n.Name, method, path, err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &doc)
	return resp.StatusCode, doc, resp.Header
}

// waitFor polls cond every 5 ms until it holds, failing t after limit,
// and returns how long it took.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	return testkit.Until(t, limit, what, cond)
}
