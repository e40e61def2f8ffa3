package gateway

import (
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"testing"
	"time"
)

// TestConnectionMetrics: levee_connections_open and
// levee_connections_accepted_total follow the data listener's connections
// (raw sockets), a connection over server.max_connections is accepted,
// refused and counted in levee_refusals_total{reason="connection_limit"},
// and every series exists at 0 before the first connection.
func TestConnectionMetrics(t *testing.T) {
	be, _ := backend(t, "web")
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
server: {max_connections: 2}
upstreams:
  web: {endpoints: [{address: %s}]}
routes:
  - {name: web, match: {path_prefix: /}, upstream: web}
`, hostPort(be)))
	const refusedKey = `{reason="connection_limit",route=""}`
	page := h.metricsPage()
	for fam, key := range map[string]string{
		"levee_connections_open":           "",
		"levee_connections_accepted_total": "",
		"levee_refusals_total":             refusedKey,
		"levee_tls_handshakes_total":       `{result="error"}`,
	} {
		if v, ok := samples(page, fam)[key]; !ok || v != 0 {
			t.Errorf("before any connection: %s%s = %v (present %v), want 0", fam, key, v, ok)
		}
	}
	var conns []net.Conn
	for range 2 {
		c, err := net.DialTimeout("tcp", h.g.Addr().String(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	// NaN for a series not there yet (levee_refusals_total's appears with
	// the first refusal): it equals nothing, so a poll goes on and a check
	// fails showing it.
	metric := func(fam, key string) float64 {
		if v, ok := h.lookupMetric(fam + key); ok {
			return v
		}
		return math.NaN()
	}
	waitFor(t, "2 open, 2 accepted", func() bool {
		return metric("levee_connections_open", "") == 2 && metric("levee_connections_accepted_total", "") == 2
	})
	// The third is over the cap: accepted, then refused.
	c, err := net.DialTimeout("tcp", h.g.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	waitFor(t, "3 accepted, 1 refused", func() bool {
		return metric("levee_connections_accepted_total", "") == 3 && metric("levee_refusals_total", refusedKey) == 1
	})
	if got := metric("levee_connections_open", ""); got != 2 {
		t.Errorf("open = %v with a refused connection, want 2", got)
	}
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "0 open", func() bool { return metric("levee_connections_open", "") == 0 })
}

// TestTLSHandshakeMetrics: levee_tls_handshakes_total counts a completed
// handshake as success and a clear-text client on the TLS port as error.
func TestTLSHandshakeMetrics(t *testing.T) {
	u := newRawUpstream(t, nil)
	h := startTLS(t, u)
	metric := func(result string) float64 {
		return h.metric(fmt.Sprintf("levee_tls_handshakes_total{result=%q}", result)) // both exported from the start
	}
	if s, e := metric("success"), metric("error"); s != 0 || e != 0 {
		t.Fatalf("before any connection: success %v, error %v, want 0", s, e)
	}
	for range 2 {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", h.g.Addr().String(),
			&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	plain, err := net.DialTimeout("tcp", h.g.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, _ = plain.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	waitFor(t, "2 successes and 1 error", func() bool { return metric("success") == 2 && metric("error") == 1 })
}
