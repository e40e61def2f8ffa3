//go:build !race

package gateway

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// TestH2HostileUpstreams: for each hostile HTTP/2 endpoint of raw frames
// (testkit.StartH2Hostile: SETTINGS flood, PING flood, every stream reset
// 64 times, endless CONTINUATION, a header block past the limit, GOAWAY on
// every connection), an upstream of that endpoint and a healthy h2c one
// serves 4 clients for 1.5 s: every request succeeds (retries and outlier
// detection move them to the healthy endpoint), the hostile connections
// are counted by reason in levee_upstream_h2_errors_total, and levee's
// heap after a GC grows by less than 32 MiB.
func TestH2HostileUpstreams(t *testing.T) {
	for _, c := range []struct{ mode, reason string }{
		{testkit.H2SettingsFlood, "settings_flood"},
		{testkit.H2PingFlood, "ping_flood"},
		{testkit.H2ResetFlood, "reset_flood"},
		{testkit.H2ContinuationFlood, "continuation_flood"},
		{testkit.H2HugeHeaders, "protocol_error"},
		{testkit.H2GoAwayLoop, "goaway"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			hostile := testkit.StartH2Hostile(t, c.mode)
			healthy := startH2CBackend(t)
			h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  u:
    protocol: h2c
    http2: {max_header_list_size: 64KiB}
    endpoints: [{address: %s}, {address: %s}]
    retry:
      attempts: 3
      on: [connect_failure, refused_stream, reset_before_response, 502, 503, 504]
      backoff: {base: 1ms, max: 5ms}
      budget: {ratio: 0.5, min_per_second: 50}
    outlier_detection: {consecutive_gateway_failures: 3, base_ejection_time: 10s}
routes:
  - {name: r, match: {path_prefix: /}, upstream: u}
`, hostile.Addr, healthy.addr))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			load := startLoad(h, 4, 2*time.Millisecond)
			time.Sleep(1500 * time.Millisecond) // the measured run, not a wait for a state
			load.stop()
			runtime.GC()
			runtime.ReadMemStats(&after)
			sent, failed := load.sent.Load(), load.failed.Load()
			m := testkit.Scrape(t, h.admin+"/metrics")
			counted := m.Value(t, `levee_upstream_h2_errors_total{reason="`+c.reason+`",upstream="u"}`)
			growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("%s: %d requests, %d failed; hostile connections %d, frames written %d; %s counted %v; heap %+.1f MiB",
				c.mode, sent, failed, hostile.Conns.Load(), hostile.Frames.Load(), c.reason, counted, float64(growth)/(1<<20))
			if failed != 0 {
				t.Errorf("%d of %d requests failed; first: %v", failed, sent, load.firstErr.Load())
			}
			if sent < 100 {
				t.Errorf("only %d requests in 1.5 s: the load did not run", sent)
			}
			if hostile.Conns.Load() == 0 || counted < 1 {
				t.Errorf("the hostile endpoint saw %d connections and %v were counted as %s", hostile.Conns.Load(), counted, c.reason)
			}
			if growth > 32<<20 {
				t.Errorf("heap grew by %d bytes", growth)
			}
		})
	}
}
