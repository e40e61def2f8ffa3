package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/h1server"
)

// TestHTTP2GoAwaysCounted: through a real levee with TLS, a normal HTTP/2
// client (net/http, ALPN h2) is served through h1server's flood guard;
// levee_http2_goaways_total has every reason from the start at 0 (and
// levee_http2_reset_streams_dropped_total is 0), and the
// GOAWAY NO_ERROR a graceful shutdown sends is counted.
func TestHTTP2GoAwaysCounted(t *testing.T) {
	u := newRawUpstream(t, nil)
	h := startTLS(t, u)
	page := h.metricsPage()
	for _, r := range h1server.HTTP2GoAwayReasons() {
		if line := `levee_http2_goaways_total{reason="` + r + `"} 0`; !strings.Contains(page, line+"\n") {
			t.Errorf("no %q on /metrics at start", line)
		}
	}
	if line := "levee_http2_reset_streams_dropped_total 0"; !strings.Contains(page, line+"\n") {
		t.Errorf("no %q on /metrics at start", line)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for i := 0; i < 3; i++ {
		resp, err := client.Get(fmt.Sprintf("https://%s/h2/%d", h.g.Addr(), i))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("%s %d %q", resp.Proto, resp.StatusCode, b)
		}
	}
	if n := h.metric(`levee_http2_goaways_total{reason="no_error"}`); n != 0 {
		t.Fatalf("no_error GOAWAYs %v before the shutdown", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// The admin listener is closed now: read the registry itself.
	got := map[string]float64{}
	mfs, err := h.g.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "levee_http2_goaways_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	for _, r := range h1server.HTTP2GoAwayReasons() {
		want := 0.0
		if r == "no_error" {
			want = 1 // the client's one connection
		}
		if got[r] != want {
			t.Errorf("levee_http2_goaways_total{reason=%q} = %v, want %v", r, got[r], want)
		}
	}
}
