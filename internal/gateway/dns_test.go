package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// zoneServer is a real DNS server (miekg/dns's) on loopback UDP, answering
// from records the test changes.
type zoneServer struct {
	addr    string
	srv     *dns.Server
	mu      sync.Mutex
	records map[string][]string // "name. TYPE" → zone-file lines
}

func startZoneServer(t *testing.T) *zoneServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	z := &zoneServer{addr: pc.LocalAddr().String(), records: map[string][]string{}}
	started := make(chan struct{})
	z.srv = &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(z.serve), NotifyStartedFunc: func() { close(started) }}
	go func() { _ = z.srv.ActivateAndServe() }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("test DNS server did not start")
	}
	t.Cleanup(func() { _ = z.srv.Shutdown() })
	return z
}

// set replaces name's records of type t by lines ("a.test. 1 IN A 127.0.0.2").
func (z *zoneServer) set(name string, t uint16, lines ...string) {
	z.mu.Lock()
	z.records[dns.Fqdn(name)+" "+dns.TypeToString[t]] = lines
	z.mu.Unlock()
}

func (z *zoneServer) serve(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	if len(req.Question) == 1 {
		q := req.Question[0]
		z.mu.Lock()
		for _, line := range z.records[strings.ToLower(q.Name)+" "+dns.TypeToString[q.Qtype]] {
			if rr, err := dns.NewRR(line); err == nil {
				m.Answer = append(m.Answer, rr)
			}
		}
		z.mu.Unlock()
	}
	_ = w.WriteMsg(m)
}

// ipBackend is an HTTP server on one loopback IP that counts its requests.
type ipBackend struct {
	ip   string
	hits atomic.Int64
}

// startIPBackends starts one HTTP server on each of ips (127.0.0.x), all
// on the same port (DNS A records carry no port), and returns the port.
func startIPBackends(t *testing.T, ips ...string) (int, []*ipBackend) {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ { // bound: a port free on every IP is found in a few tries
		var lns []net.Listener
		port := 0
		for _, ip := range ips {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				break
			}
			port = ln.Addr().(*net.TCPAddr).Port
			lns = append(lns, ln)
		}
		if len(lns) != len(ips) {
			for _, ln := range lns {
				ln.Close()
			}
			continue
		}
		bs := make([]*ipBackend, len(ips))
		for i, ln := range lns {
			b := &ipBackend{ip: ips[i]}
			bs[i] = b
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b.hits.Add(1)
				io.WriteString(w, b.ip)
			}), ReadHeaderTimeout: 5 * time.Second}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { srv.Close() })
		}
		return port, bs
	}
	t.Fatal("no port free on every loopback IP")
	return 0, nil
}

// servedBy GETs path and returns the body (the backend's IP).
func servedBy(t *testing.T, h *harness, path string) string {
	t.Helper()
	resp := h.get(path)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", path, resp.Status, body)
	}
	return string(body)
}

// tryServedBy is servedBy for a poll: "" for a refusal (as before the
// first resolution, when the upstream has no endpoint yet).
func tryServedBy(h *harness, path string) string {
	resp := h.get(path)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return ""
	}
	return string(body)
}

// waitServedSet polls until requests to path reach exactly the backends
// in want (by IP) within the deadline.
func waitServedSet(t *testing.T, h *harness, path string, deadline time.Duration, want ...string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		seen := map[string]bool{}
		for range 4 * len(want) {
			seen[tryServedBy(h, path)] = true
		}
		ok := len(seen) == len(want)
		for _, w := range want {
			ok = ok && seen[w]
		}
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	t.Fatalf("requests to %s never reached exactly %v within %v", path, want, deadline)
}

// TestDNSUpstreamFollowsRecords (issue 24 item 7): an upstream whose
// endpoints are a name's A records follows the records as they change,
// within the TTL (1 s here, a real wait); a dns_srv upstream serves its
// lowest-priority targets on their SRV ports; the delta guard holds a
// name's disappearance.
func TestDNSUpstreamFollowsRecords(t *testing.T) {
	z := startZoneServer(t)
	port, _ := startIPBackends(t, "127.0.0.2", "127.0.0.3")
	z.set("api.test", dns.TypeA, "api.test. 1 IN A 127.0.0.2")
	srvA, srvB := newCountingBackend(t), newCountingBackend(t)
	_, portA, _ := net.SplitHostPort(hostPort(srvA.srv))
	_, portB, _ := net.SplitHostPort(hostPort(srvB.srv))
	z.set("_http._tcp.svc.test", dns.TypeSRV,
		"_http._tcp.svc.test. 1 IN SRV 1 1 "+portA+" one.svc.test.",
		"_http._tcp.svc.test. 1 IN SRV 2 1 "+portB+" two.svc.test.")
	z.set("one.svc.test", dns.TypeA, "one.svc.test. 1 IN A 127.0.0.1")
	z.set("two.svc.test", dns.TypeA, "two.svc.test. 1 IN A 127.0.0.1")

	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  api:
    discovery: {dns: {name: "api.test:%d", resolver: %q}}
  svc:
    discovery: {dns_srv: {name: _http._tcp.svc.test, resolver: %q}}
routes:
  - {name: svc, match: {path_prefix: /svc/}, upstream: svc}
  - {name: api, match: {path_prefix: /}, upstream: api}
`, port, z.addr, z.addr))

	waitServedSet(t, h, "/x", 10*time.Second, "127.0.0.2")
	// Two addresses: both serve within the TTL.
	z.set("api.test", dns.TypeA, "api.test. 1 IN A 127.0.0.2", "api.test. 1 IN A 127.0.0.3")
	start := time.Now()
	waitServedSet(t, h, "/x", 10*time.Second, "127.0.0.2", "127.0.0.3")
	t.Logf("a new A record served %v after the change (TTL 1 s)", time.Since(start).Round(time.Millisecond))
	// One replaced (half the weight goes: within max_drop_fraction 0.5).
	z.set("api.test", dns.TypeA, "api.test. 1 IN A 127.0.0.3")
	waitServedSet(t, h, "/x", 10*time.Second, "127.0.0.3")

	// SRV: only priority 1's target serves (after its first resolution).
	for end := time.Now().Add(10 * time.Second); srvA.hits.Load() == 0; {
		if time.Now().After(end) {
			t.Fatal("the dns_srv upstream never served")
		}
		tryServedBy(h, "/svc/x")
	}
	before := srvA.hits.Load()
	for range 5 {
		resp := h.get("/svc/x")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET /svc/x: %s", resp.Status)
		}
	}
	if srvA.hits.Load() != before+5 || srvB.hits.Load() != 0 {
		t.Fatalf("SRV upstream: priority-1 target got %d of 5, priority-2 target %d; want 5 and 0", srvA.hits.Load()-before, srvB.hits.Load())
	}

	// The name disappears: the empty answer is held by the delta guard
	// and the last set keeps serving.
	z.set("api.test", dns.TypeA)
	deadline := time.Now().Add(10 * time.Second)
	for !metricAtLeast(h, `levee_discovery_updates_total{result="held",upstream="api"}`, 1) {
		if time.Now().After(deadline) {
			t.Fatal("the empty answer was never held")
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	if got := servedBy(t, h, "/x"); got != "127.0.0.3" {
		t.Fatalf("after the name disappeared, served by %q", got)
	}
}

func metricAtLeast(h *harness, series string, v float64) bool {
	got, ok := h.lookupMetric(series)
	return ok && got >= v
}
