package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTestMetrics(t *testing.T) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// dnsServer is a real DNS server on loopback UDP and TCP (miekg/dns's
// server) answering from a zone the test changes.
type dnsServer struct {
	addr    string
	udp     *dns.Server
	tcp     *dns.Server
	mu      sync.Mutex
	records map[string][]string // "name type" → zone-file lines
	rcode   int                 // when not success, every answer has it
	queries int
	// truncateUDP makes every UDP answer empty and truncated, so that
	// the client must ask again over TCP.
	truncateUDP bool
	tcpQueries  int
}

func startDNS(t *testing.T) *dnsServer {
	t.Helper()
	s := &dnsServer{records: map[string][]string{}}
	var pc net.PacketConn
	var ln net.Listener
	// UDP and TCP on one port: a port free for UDP may be taken for TCP,
	// so try again (bound: 20 attempts).
	for attempt := 0; ln == nil; attempt++ {
		if attempt == 20 {
			t.Fatal("no loopback port free for both UDP and TCP")
		}
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err != nil {
			pc.Close()
			ln = nil
		}
	}
	s.addr = pc.LocalAddr().String()
	h := dns.HandlerFunc(s.serve)
	s.udp = &dns.Server{PacketConn: pc, Handler: h}
	s.tcp = &dns.Server{Listener: ln, Handler: h}
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("test DNS server did not start")
		}
	}
	t.Cleanup(s.stop)
	return s
}

func (s *dnsServer) stop() {
	_ = s.udp.Shutdown()
	_ = s.tcp.Shutdown()
}

// set replaces the records of name and type with lines such as
// "api.test. 5 IN A 10.0.0.1".
func (s *dnsServer) set(name string, t uint16, lines ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[strings.ToLower(dns.Fqdn(name))+" "+dns.TypeToString[t]] = lines
}

func (s *dnsServer) setRcode(rc int) {
	s.mu.Lock()
	s.rcode = rc
	s.mu.Unlock()
}

func (s *dnsServer) serve(w dns.ResponseWriter, req *dns.Msg) {
	s.mu.Lock()
	s.queries++
	m := new(dns.Msg)
	m.SetReply(req)
	m.Rcode = s.rcode
	_, isUDP := w.LocalAddr().(*net.UDPAddr)
	if !isUDP {
		s.tcpQueries++
	}
	if isUDP && s.truncateUDP {
		m.Truncated = true
		s.mu.Unlock()
		_ = w.WriteMsg(m)
		return
	}
	if s.rcode == dns.RcodeSuccess && len(req.Question) == 1 {
		q := req.Question[0]
		for _, line := range s.records[strings.ToLower(q.Name)+" "+dns.TypeToString[q.Qtype]] {
			rr, err := dns.NewRR(line)
			if err == nil {
				m.Answer = append(m.Answer, rr)
			}
		}
	}
	s.mu.Unlock()
	_ = w.WriteMsg(m)
}

func dnsAddrs(list []Instance) []string {
	out := make([]string, 0, len(list))
	for _, in := range list {
		out = append(out, in.Address)
	}
	return out
}

func TestDNSSourceAddressesAndTTL(t *testing.T) {
	srv := startDNS(t)
	srv.set("api.test", dns.TypeA, "api.test. 7 IN A 10.0.0.1", "api.test. 30 IN A 10.0.0.2")
	srv.set("api.test", dns.TypeAAAA, "api.test. 20 IN AAAA 2001:db8::1")
	s, err := NewDNSSource(DNSOptions{Host: "api.test", Port: 8080, Weight: 3, Zone: "a", Resolver: srv.addr})
	if err != nil {
		t.Fatal(err)
	}
	ev, ttl := s.Refresh(context.Background())
	if ev.Err != nil {
		t.Fatal(ev.Err)
	}
	got := dnsAddrs(ev.Update.Instances)
	want := []string{"10.0.0.1:8080", "10.0.0.2:8080", "[2001:db8::1]:8080"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("instances %v, want %v", got, want)
	}
	for _, in := range ev.Update.Instances {
		if in.Weight != 300 || in.Zone != "a" {
			t.Fatalf("instance %+v: want weight 300 (3 units) and zone a", in)
		}
	}
	if ttl != 7 || RefreshAfter(ttl) != 7*time.Second {
		t.Fatalf("ttl %d (refresh after %v), want the shortest, 7", ttl, RefreshAfter(ttl))
	}
	if !s.Connected() || ev.Source != "dns:api.test:8080" {
		t.Fatalf("connected %v source %q", s.Connected(), ev.Source)
	}
}

func TestRefreshAfterBounds(t *testing.T) {
	for _, c := range []struct {
		ttl  uint32
		want time.Duration
	}{{0, time.Second}, {1, time.Second}, {59, 59 * time.Second}, {3600, time.Hour}, {86400, time.Hour}, {^uint32(0), time.Hour}} {
		if got := RefreshAfter(c.ttl); got != c.want {
			t.Errorf("RefreshAfter(%d) = %v, want %v", c.ttl, got, c.want)
		}
	}
}

// TestDNSSourceFollowsChange runs the source with a fake wait: each wait
// the source decides is recorded and ends when the test says, so the test
// checks the TTL decision without sleeping for it.
func TestDNSSourceFollowsChange(t *testing.T) {
	srv := startDNS(t)
	srv.set("svc.test", dns.TypeA, "svc.test. 12 IN A 10.1.0.1")
	waits := make(chan time.Duration)
	resume := make(chan struct{})
	s, err := NewDNSSource(DNSOptions{Host: "svc.test", Port: 80, Weight: 1, Resolver: srv.addr,
		Wait: func(ctx context.Context, d time.Duration) bool {
			select {
			case waits <- d:
			case <-ctx.Done():
				return false
			}
			select {
			case <-resume:
				return true
			case <-ctx.Done():
				return false
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx, c.deliver) }()
	defer func() { cancel(); <-done }()

	next := func(wantWait time.Duration) Event {
		t.Helper()
		select {
		case d := <-waits:
			if wantWait >= 0 && d != wantWait {
				t.Fatalf("source waits %v, want %v", d, wantWait)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no refresh")
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.events[len(c.events)-1]
	}
	ev := next(12 * time.Second)
	if got := dnsAddrs(ev.Update.Instances); len(got) != 1 || got[0] != "10.1.0.1:80" {
		t.Fatalf("first set %v", got)
	}
	// The record changes; the next refresh (when the 12 s TTL ends) sees it.
	srv.set("svc.test", dns.TypeA, "svc.test. 0 IN A 10.1.0.2", "svc.test. 0 IN A 10.1.0.3")
	resume <- struct{}{}
	ev = next(MinDNSRefresh) // TTL 0 is bounded to 1 s
	if got := dnsAddrs(ev.Update.Instances); strings.Join(got, " ") != "10.1.0.2:80 10.1.0.3:80" {
		t.Fatalf("after the change %v", got)
	}
	// Resolver failing: an unavailable event, and a backoff wait.
	srv.setRcode(dns.RcodeServerFailure)
	resume <- struct{}{}
	ev = next(-1)
	if !errors.Is(ev.Err, ErrUnavailable) || s.Connected() {
		t.Fatalf("SERVFAIL gave %v (connected %v), want ErrUnavailable", ev.Err, s.Connected())
	}
}

func TestDNSSourceSRV(t *testing.T) {
	srv := startDNS(t)
	srv.set("_http._tcp.api.test", dns.TypeSRV,
		"_http._tcp.api.test. 60 IN SRV 10 5 8080 a.api.test.",
		"_http._tcp.api.test. 9 IN SRV 10 0 8081 b.api.test.",
		"_http._tcp.api.test. 60 IN SRV 20 1 9000 backup.api.test.")
	srv.set("a.api.test", dns.TypeA, "a.api.test. 60 IN A 10.2.0.1")
	srv.set("a.api.test", dns.TypeAAAA, "a.api.test. 60 IN AAAA 2001:db8::a")
	srv.set("b.api.test", dns.TypeA, "b.api.test. 60 IN A 10.2.0.2")
	srv.set("backup.api.test", dns.TypeA, "backup.api.test. 60 IN A 10.2.0.9")
	s, err := NewDNSSource(DNSOptions{SRV: "_http._tcp.api.test", Zone: "z1", Resolver: srv.addr})
	if err != nil {
		t.Fatal(err)
	}
	ev, ttl := s.Refresh(context.Background())
	if ev.Err != nil {
		t.Fatal(ev.Err)
	}
	want := map[string]uint32{"10.2.0.1:8080": 500, "[2001:db8::a]:8080": 500, "10.2.0.2:8081": 1}
	if len(ev.Update.Instances) != len(want) {
		t.Fatalf("instances %+v, want the priority-10 tier %v", ev.Update.Instances, want)
	}
	for _, in := range ev.Update.Instances {
		if w, ok := want[in.Address]; !ok || w != in.Weight || in.Zone != "z1" {
			t.Fatalf("instance %+v, want %v in zone z1", in, want)
		}
	}
	if ttl != 9 {
		t.Fatalf("ttl %d, want 9", ttl)
	}
}

// TestDNSSourceSRVPoisonedWeight: a SRV weight over max_weight is
// quarantined as too_large, like a registry record, and the rest serve.
func TestDNSSourceSRVPoisonedWeight(t *testing.T) {
	srv := startDNS(t)
	srv.set("_h._tcp.p.test", dns.TypeSRV,
		"_h._tcp.p.test. 60 IN SRV 0 65535 80 bad.p.test.",
		"_h._tcp.p.test. 60 IN SRV 0 10 80 good.p.test.")
	srv.set("bad.p.test", dns.TypeA, "bad.p.test. 60 IN A 10.3.0.1")
	srv.set("good.p.test", dns.TypeA, "good.p.test. 60 IN A 10.3.0.2")
	s, err := NewDNSSource(DNSOptions{SRV: "_h._tcp.p.test", Resolver: srv.addr, Limits: Limits{MaxWeight: 100}})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := s.Refresh(context.Background())
	if ev.Err != nil {
		t.Fatal(ev.Err)
	}
	if got := dnsAddrs(ev.Update.Instances); len(got) != 1 || got[0] != "10.3.0.2:80" {
		t.Fatalf("served %v, want only the good target", got)
	}
	if len(ev.Update.Rejected) != 1 || ev.Update.Rejected[0].Reason != ReasonTooLarge {
		t.Fatalf("rejected %+v, want one too_large", ev.Update.Rejected)
	}
}

// TestDNSFeedKeepsLastSet runs a Feed over a DNS source: a resolver that
// goes down keeps the last set (the refusal counted), and a name with no
// addresses is an empty answer the delta guard holds.
func TestDNSFeedKeepsLastSet(t *testing.T) {
	srv := startDNS(t)
	srv.set("k.test", dns.TypeA, "k.test. 1 IN A 10.4.0.1", "k.test. 1 IN A 10.4.0.2")
	src, err := NewDNSSource(DNSOptions{Host: "k.test", Port: 80, Weight: 1, Resolver: srv.addr, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m := newTestMetrics(t)
	f, err := NewFeed(FeedOptions{Upstream: "k", StateDir: t.TempDir(), Metrics: m,
		Guard: GuardOptions{MaxDropFraction: 0.5, ConfirmAfter: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ev, _ := src.Refresh(ctx)
	f.handle(ev)
	if got, origin := f.Instances(); len(got) != 2 || origin != "registry" {
		t.Fatalf("served %v from %q", dnsAddrs(got), origin)
	}
	// Resolver down: the event is refused, the set stays.
	srv.stop()
	ev, _ = src.Refresh(ctx)
	if !errors.Is(ev.Err, ErrUnavailable) {
		t.Fatalf("resolver down gave %v", ev.Err)
	}
	f.handle(ev)
	if got, _ := f.Instances(); len(got) != 2 {
		t.Fatalf("after the resolver went down, served %v", dnsAddrs(got))
	}
	if n := testutil.ToFloat64(m.updates.WithLabelValues("k", "refused")); n != 1 {
		t.Fatalf("refused updates %v, want 1", n)
	}
}

// TestDNSEmptyAnswerHeld: a name with no addresses left is an empty
// update, which the delta guard holds instead of draining the upstream.
func TestDNSEmptyAnswerHeld(t *testing.T) {
	srv := startDNS(t)
	srv.set("e.test", dns.TypeA, "e.test. 1 IN A 10.5.0.1", "e.test. 1 IN A 10.5.0.2")
	src, err := NewDNSSource(DNSOptions{Host: "e.test", Port: 80, Weight: 1, Resolver: srv.addr})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFeed(FeedOptions{Upstream: "e", StateDir: t.TempDir(), Metrics: newTestMetrics(t),
		Guard: GuardOptions{MaxDropFraction: 0.5, ConfirmAfter: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := src.Refresh(context.Background())
	f.handle(ev)
	srv.set("e.test", dns.TypeA) // NOERROR, no records
	ev, _ = src.Refresh(context.Background())
	if ev.Err != nil || len(ev.Update.Instances) != 0 {
		t.Fatalf("empty answer gave %+v", ev)
	}
	f.handle(ev)
	if got, _ := f.Instances(); len(got) != 2 || f.State().Held == nil {
		t.Fatalf("after an empty answer served %v, held %v; want the old set served and the empty one held", dnsAddrs(got), f.State().Held)
	}
}

func TestSRVTier(t *testing.T) {
	got := SRVTier([]SRVTarget{{1, 0, 80, "a."}, {1, 0, 80, "b."}, {0, 5, 80, "."}, {2, 9, 80, "c."}})
	if len(got) != 2 || got[0].Weight != 1 || got[1].Weight != 1 {
		t.Fatalf("all-zero tier %+v, want two of weight 1", got)
	}
	got = SRVTier([]SRVTarget{{1, 0, 80, "a."}, {1, 4, 80, "b."}})
	if srvWeight(got[0].Weight) != srvTinyWeight || got[1].Weight != 4 {
		t.Fatalf("mixed tier %+v", got)
	}
	u, err := RecordsUpdate([]DNSRecord{{IP: netip.MustParseAddr("10.0.0.1"), Port: 1, Weight: srvTinyWeight}}, Limits{})
	if err != nil || u.Instances[0].Weight != 1 {
		t.Fatalf("tiny weight gave %+v, %v; want 1 hundredth", u, err)
	}
}

func TestNewDNSSourceRefuses(t *testing.T) {
	for _, o := range []DNSOptions{
		{},
		{Host: "a.test", SRV: "_x._tcp.a.test", Port: 1},
		{Host: "a.test"},
		{Host: "a..test", Port: 1},
		{Host: "a.test", Port: 1, Resolver: "dns.example:53"},
	} {
		if _, err := NewDNSSource(o); err == nil {
			t.Errorf("NewDNSSource(%+v) accepted", o)
		}
	}
}

// TestDNSTruncatedRetriesOverTCP: a truncated UDP answer is asked again
// over TCP, and an answer over maxDNSAnswer records is refused whole.
func TestDNSTruncatedRetriesOverTCP(t *testing.T) {
	srv := startDNS(t)
	lines := make([]string, 0, maxDNSAnswer+1)
	for i := range 300 {
		lines = append(lines, fmt.Sprintf("big.test. 60 IN A 10.9.%d.%d", i/250, i%250+1))
	}
	srv.set("big.test", dns.TypeA, lines...)
	srv.mu.Lock()
	srv.truncateUDP = true
	srv.mu.Unlock()
	s, err := NewDNSSource(DNSOptions{Host: "big.test", Port: 80, Weight: 1, Resolver: srv.addr})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := s.Refresh(context.Background())
	if ev.Err != nil || len(ev.Update.Instances) != 300 {
		t.Fatalf("got %d instances, err %v; want 300 over TCP", len(ev.Update.Instances), ev.Err)
	}
	srv.mu.Lock()
	tcp := srv.tcpQueries
	srv.mu.Unlock()
	if tcp < 2 {
		t.Fatalf("%d TCP queries, want the A and AAAA retries", tcp)
	}
	for i := 300; i <= maxDNSAnswer; i++ {
		lines = append(lines, fmt.Sprintf("big.test. 60 IN A 10.8.%d.%d", i/250, i%250+1))
	}
	srv.set("big.test", dns.TypeA, lines...)
	ev, _ = s.Refresh(context.Background())
	var pe *PayloadError
	if !errors.As(ev.Err, &pe) || pe.Code != CodeTooManyInstances {
		t.Fatalf("an answer of %d records gave %v, want too_many_instances", len(lines), ev.Err)
	}
}
