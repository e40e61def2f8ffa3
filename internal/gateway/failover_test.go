package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/health"
)

// failoverLoad sends GET / from clients goroutines until total requests
// have been sent, calling kill once when killAt of them have been sent.
// It returns the failures (transport errors or any status but 200), with
// the first few described.
func failoverLoad(h *harness, clients, total, killAt int, kill func()) (failed int64, first []string) {
	var next, fails atomic.Int64
	var once sync.Once
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(total) {
					return
				}
				if n == int64(killAt) {
					once.Do(kill)
				}
				resp, err := h.client.Get(h.base + "/")
				what := ""
				if err != nil {
					what = err.Error()
				} else {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						what = fmt.Sprintf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
					}
				}
				if what != "" {
					fails.Add(1)
					mu.Lock()
					if len(first) < 5 {
						first = append(first, what)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return fails.Load(), first
}

// TestEndpointKilledUnderLoad (issue 14): one of three endpoints stops
// (its listener and idle connections closed: connection refused; the
// requests it is serving finish, see stopAfterInflight) under steady
// load from several clients, with the default retry conditions, attempts
// 2 and active checks every 500 ms. No client request fails over 3,000
// requests. The refused endpoint is ejected at once, without an
// outlier_detection block.
//
// Closing a listening socket makes the kernel reset the connections it
// had accepted for it and the server had not yet taken (Linux
// inet_csk_listen_stop): a request levee sent on a connection it opened
// just before the kill meets a reset, not a refusal, exactly as when a
// backend dies mid-request. That is reset_before_response, retried at the
// budget's cost, so the budget here allows 10 retries in its 10 s window
// (ratio 0, min_per_second 1); CI met one such request in 3,000 when
// reset_before_response was not listed. That connect-failure retries are
// free of the budget is proven with no budget at all by TestRetryRules
// and TestDecideRetry, where no listener is ever closed under load.
func TestEndpointKilledUnderLoad(t *testing.T) {
	a, b, c := newSwitchBackend(t, "a"), newSwitchBackend(t, "b"), newSwitchBackend(t, "c")
	h := start(t, healthYAML("u", []*switchBackend{a, b, c}, nil, `
    retry: {attempts: 2, on: [connect_failure, reset_before_response, 502, 503, 504], backoff: {base: 1ms, max: 5ms}, budget: {ratio: 0, min_per_second: 1}}
    health_check: {http: {path: /healthz}, interval: 500ms, timeout: 250ms}`))
	const total = 3000
	failed, first := failoverLoad(h, 6, total, total/3, c.stopAfterInflight)
	if failed != 0 {
		t.Errorf("%d of %d requests failed after one endpoint was killed; first: %q", failed, total, first)
	}
	retries := h.metric(`levee_retries_total{reason="connect_failure",upstream="u"}`)
	resets := h.metric(`levee_retries_total{reason="reset_before_response",upstream="u"}`)
	exhausted := h.metric(`levee_retry_budget_exhausted_total{upstream="u"}`)
	t.Logf("%d requests, %d failed; connect_failure retries %v; reset_before_response retries %v; budget exhausted %v; c served %d", total, failed, retries, resets, exhausted, c.hits.Load())
	if retries == 0 {
		t.Error("no connect_failure retry: the killed endpoint was never tried, the test proves nothing")
	}
	if exhausted != 0 {
		t.Errorf("levee_retry_budget_exhausted_total = %v, want 0", exhausted)
	}
	if got := h.metric(`levee_upstream_ejections_total{reason="connect_refused",upstream="u"}`); got != 1 {
		t.Errorf("connect_refused ejections = %v, want 1", got)
	}
	st, _ := endpointStates(t, h, "u")
	if s := st[c.addr]; s != "ejected" && s != "unhealthy" {
		t.Errorf("killed endpoint is %q, want ejected (or unhealthy)", s)
	}
}

// TestZoneKilledUnderLoad (issue 14): zone a (local, 3 endpoints) and zone
// b (3 endpoints); all of zone a stops at once under load with retries on.
// No client request fails: a retry goes to an endpoint that has not failed
// in its request (nor refused lately), and to zone b once zone a has none
// left, before any health check has marked zone a down. attempts is 4, one
// more than zone a has endpoints: then the rule alone guarantees it (the
// worst request meets every dead zone-a endpoint first, then zone b), and
// connect-failure retries are free of the budget, so the bound costs the
// backends nothing. With attempts 3 the refusal marks usually steer the
// third attempt to zone b, but a request that is the first to meet all
// three dead endpoints still fails (1 run in about 20 under a full load).
// reset_before_response is listed (at the budget's cost, the default
// budget here) for the requests the kernel resets when a listener closes
// with connections it accepted but the server never took; see
// TestEndpointKilledUnderLoad. The access log is on so that a failure
// shows its attempts.
func TestZoneKilledUnderLoad(t *testing.T) {
	var bs []*switchBackend
	var zones []string
	for i := range 6 {
		bs = append(bs, newSwitchBackend(t, fmt.Sprintf("z%d", i)))
		zones = append(zones, map[bool]string{true: "a", false: "b"}[i < 3])
	}
	h := start(t, strings.Replace(healthYAML("u", bs, zones, `
    zones: {local: a, failover: [b]}
    retry: {attempts: 4, on: [connect_failure, reset_before_response, 502, 503, 504], backoff: {base: 1ms, max: 5ms}}
    health_check: {http: {path: /healthz}, interval: 500ms, timeout: 250ms}`), "log: {access: false}", "log: {access: true}", 1))
	killZoneA := func() {
		var wg sync.WaitGroup
		for _, b := range bs[:3] {
			wg.Add(1)
			go func() { defer wg.Done(); b.stop() }()
		}
		wg.Wait()
	}
	const total = 3000
	failed, first := failoverLoad(h, 6, total, total/3, killZoneA)
	var inA, inB int64
	for i, b := range bs {
		if i < 3 {
			inA += b.hits.Load()
		} else {
			inB += b.hits.Load()
		}
	}
	retries := h.metric(`levee_retries_total{reason="connect_failure",upstream="u"}`)
	t.Logf("%d requests, %d failed; zone a served %d, zone b %d; connect_failure retries %v", total, failed, inA, inB, retries)
	if failed != 0 {
		t.Errorf("%d of %d requests failed after zone a was killed; first: %q", failed, total, first)
		for _, line := range strings.Split(h.logs.String(), "\n") {
			if strings.Contains(line, `"status":502`) {
				t.Logf("access log: %s", line)
			}
		}
	}
	if retries == 0 {
		t.Error("no connect_failure retry: zone a was never tried after the kill, the test proves nothing")
	}
	if inB < total/2 {
		t.Errorf("zone b served %d of %d, want most of the two thirds after the kill", inB, total)
	}
	h.noCount(`levee_retry_budget_exhausted_total{upstream="u"}`)
}

// rawExchange sends raw bytes on a new connection to addr, half-closes
// the write side when closeWrite is set, and returns the response levee
// wrote (nil when it closed the connection without one).
func rawExchange(t *testing.T, addr, req string, closeWrite bool) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	if closeWrite {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rf refusal
	if resp.StatusCode == 400 && (json.Unmarshal(body, &rf) != nil || rf.Reason != "bad_request") {
		t.Errorf("400 body %q, want a JSON refusal with reason bad_request", body)
	}
	return resp
}

// TestClientBodyFaultsAreNotTheEndpoints (issue 14): an anonymous client
// sends malformed chunked bodies and bodies shorter than their
// Content-Length to a healthy endpoint, on a route that streams the body
// (no retries) and on one that buffers it for replay. Each is answered 400
// bad_request (or, if levee sees the client gone, recorded 499), never
// 502; the endpoint, which outlier detection would eject after 3 gateway
// failures, stays healthy, and a good request then succeeds.
func TestClientBodyFaultsAreNotTheEndpoints(t *testing.T) {
	ep := newSwitchBackend(t, "e")
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  u:
    endpoints: [{address: %[1]s}]
    outlier_detection: {consecutive_gateway_failures: 3, max_ejection_percent: 100}
  r:
    endpoints: [{address: %[1]s}]
    outlier_detection: {consecutive_gateway_failures: 3, max_ejection_percent: 100}
    retry: {attempts: 2, on: [connect_failure, 502, 503, 504]}
routes:
  - {name: stream, match: {path_prefix: /stream/}, upstream: u}
  - {name: replay, match: {path_prefix: /replay/}, upstream: r}
`, ep.addr))
	addr := strings.TrimPrefix(h.base, "http://")
	bad := []struct {
		name       string
		req        string
		closeWrite bool
	}{
		{"bad chunk size", "POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", false},
		{"chunk then garbage", "POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX1\r\nx\r\n0\r\n\r\n", false},
		{"chunked, client stops", "POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", true},
		{"short Content-Length", "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten b", true},
	}
	for _, path := range []string{"/stream/", "/replay/"} {
		for round := range 2 {
			for _, tc := range bad {
				resp := rawExchange(t, addr, fmt.Sprintf(tc.req, path), tc.closeWrite)
				switch {
				case resp == nil:
					// Closed without an answer: levee recorded 499 (checked below).
				case resp.StatusCode != 400:
					t.Errorf("%s %s (round %d): status %d, want 400 bad_request", path, tc.name, round, resp.StatusCode)
				}
			}
		}
	}
	for _, up := range []string{"u", "r"} {
		st, _ := endpointStates(t, h, up)
		if s := st[ep.addr]; s != "healthy" {
			t.Errorf("upstream %s: endpoint is %q after clients' bad bodies, want healthy", up, s)
		}
		for _, reason := range health.EjectionReasons {
			h.noCount(fmt.Sprintf(`levee_upstream_ejections_total{reason=%q,upstream=%q}`, reason, up))
		}
	}
	var answered float64
	for _, rt := range []string{"stream", "replay"} {
		for _, code := range []string{"400", "499"} {
			v, _ := h.lookupMetric(fmt.Sprintf(`levee_requests_total{code=%q,route=%q,upstream=%q}`, code, rt, map[string]string{"stream": "u", "replay": "r"}[rt]))
			answered += v // one of the two codes may have no series: the sum is checked below
		}
		h.noCount(fmt.Sprintf(`levee_requests_total{code="502",route=%q,upstream=%q}`, rt, map[string]string{"stream": "u", "replay": "r"}[rt]))
	}
	if want := float64(2 * 2 * len(bad)); answered != want {
		t.Errorf("%v requests recorded 400 or 499, want %v", answered, want)
	}
	for _, path := range []string{"/stream/", "/replay/"} {
		resp, err := h.client.Post(h.base+path, "text/plain", strings.NewReader("a good body"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("good POST %s after the bad ones: status %d", path, resp.StatusCode)
		}
	}
	t.Logf("bad bodies recorded 400/499: %v; endpoint healthy; good requests served", answered)
}
