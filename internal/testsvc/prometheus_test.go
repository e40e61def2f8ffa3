package testsvc

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestPrometheusStartsAndStops(t *testing.T) {
	p := StartPrometheus(t, "global: {scrape_interval: 5s, evaluation_interval: 5s}\n")
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get(p.URL + "/api/v1/status/buildinfo")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"version"`) {
		t.Fatalf("buildinfo: %d %s (%v)", resp.StatusCode, body, err)
	}
	p.Stop()
	if resp, err := client.Get(p.URL + "/-/ready"); err == nil {
		resp.Body.Close()
		t.Fatal("prometheus still answering after Stop")
	}
}

func TestPromtoolFound(t *testing.T) {
	if path := Promtool(t); !strings.HasSuffix(path, "promtool") {
		t.Fatalf("Promtool = %q", path)
	}
}
