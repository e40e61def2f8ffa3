package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// DNS sources: an upstream whose instances are the A/AAAA addresses of a
// name (DNSSource with Host set), or the targets of a SRV name (SRV set).
// Each refresh builds the complete instance list and passes it through the
// same firewall as a registry file (ParseList), so weights, zones,
// duplicates and limits follow the registry rules, and the feed's delta
// guard judges every change. Queries go to one resolver with
// github.com/miekg/dns, which (unlike net.Resolver) returns the records'
// TTLs: the next refresh is due when the shortest TTL of the answer ends,
// bounded to [MinDNSRefresh, MaxDNSRefresh].

// Bounds of the DNS sources.
const (
	// MinDNSRefresh and MaxDNSRefresh bound the wait between refreshes,
	// whatever the TTLs say (a TTL of 0 would otherwise mean a query
	// loop; a TTL of a week a change never seen).
	MinDNSRefresh = time.Second
	MaxDNSRefresh = time.Hour
	// DefaultDNSTimeout bounds one query when DNSOptions.Timeout is 0.
	DefaultDNSTimeout = 2 * time.Second
	// dnsNegativeRefresh is the wait after an answer with no records and
	// no SOA to take a negative TTL from.
	dnsNegativeRefresh = 30 * time.Second
	// dnsRetryMax caps the backoff after a failed refresh.
	dnsRetryMax = 30 * time.Second
	// maxDNSAnswer is the most answer records one response may hold; a
	// larger answer is refused whole (too_many_instances). A TCP response
	// is at most 65535 bytes by the protocol's length prefix, a UDP one
	// dnsUDPSize.
	maxDNSAnswer = 512
	// maxSRVTargets is the most distinct targets one SRV refresh
	// resolves (2 queries each); more is refused whole.
	maxSRVTargets = 64
	// dnsUDPSize is the EDNS0 buffer size advertised.
	dnsUDPSize = 4096
	// resolvConf is where the system's resolver is read from.
	resolvConf = "/etc/resolv.conf"
)

// DNSOptions configure a DNSSource. Exactly one of Host and SRV is set.
type DNSOptions struct {
	// Host is the name whose A and AAAA records are the instances, each
	// on Port with Weight and Zone.
	Host   string
	Port   uint16
	Weight uint32 // whole units, 0..Limits.MaxWeight (0 drains)
	Zone   string
	// SRV is a "_service._proto.name" whose SRV records name the
	// targets; each target's A and AAAA addresses are instances on the
	// record's port with the record's weight (see SRVInstances), in Zone.
	SRV string
	// Resolver is the DNS server's "ip:port"; "" reads the first
	// nameserver of /etc/resolv.conf at each refresh.
	Resolver string
	// Timeout bounds each query; 0 means DefaultDNSTimeout.
	Timeout time.Duration
	Limits  Limits
	// Wait, when set (tests), replaces the timer between refreshes: it
	// is called with the wait the source decided and returns false to
	// stop Run.
	Wait func(ctx context.Context, d time.Duration) bool
}

// DNSSource resolves a name (or SRV name) and delivers its instances,
// again each time the answer's TTL ends. A failed query (timeout, server
// failure, refused, unreachable resolver) delivers an Event with an error
// wrapping ErrUnavailable: the feed keeps its last good set and counts the
// refusal. NXDOMAIN and an empty answer are an empty set: the delta guard
// decides whether to believe it.
type DNSSource struct {
	o         DNSOptions
	connected atomic.Bool
}

// NewDNSSource checks o and builds the source.
func NewDNSSource(o DNSOptions) (*DNSSource, error) {
	if (o.Host == "") == (o.SRV == "") {
		return nil, errors.New("dns source: exactly one of a host name and a SRV name is required")
	}
	if o.Host != "" {
		if _, ok := dns.IsDomainName(o.Host); !ok {
			return nil, fmt.Errorf("dns source: %q is not a DNS name", o.Host)
		}
		if o.Port == 0 {
			return nil, errors.New("dns source: a port is required with a host name")
		}
	}
	if o.SRV != "" {
		if _, ok := dns.IsDomainName(o.SRV); !ok {
			return nil, fmt.Errorf("dns source: %q is not a DNS name", o.SRV)
		}
	}
	if o.Resolver != "" {
		if _, err := netip.ParseAddrPort(o.Resolver); err != nil {
			return nil, fmt.Errorf("dns source: resolver %q: %w", o.Resolver, err)
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultDNSTimeout
	}
	if _, err := o.Limits.resolve(); err != nil {
		return nil, err
	}
	return &DNSSource{o: o}, nil
}

// Name is the source's name for the admin API: "dns:HOST:PORT" or
// "dns_srv:NAME".
func (s *DNSSource) Name() string {
	if s.o.SRV != "" {
		return "dns_srv:" + s.o.SRV
	}
	return "dns:" + net.JoinHostPort(s.o.Host, strconv.Itoa(int(s.o.Port)))
}

// Connected reports whether the last refresh reached the resolver.
func (s *DNSSource) Connected() bool { return s.connected.Load() }

// Run resolves at once, then again when each answer's TTL ends (bounded
// to [MinDNSRefresh, MaxDNSRefresh]); after a failure (resolver
// unavailable, answer too large) it retries with a jittered backoff from
// MinDNSRefresh to 30 s. One query at a time, from
// Run's goroutine.
func (s *DNSSource) Run(ctx context.Context, deliver func(Event)) error {
	t := newStoppedTimer()
	defer t.Stop()
	retry := backoff{min: MinDNSRefresh, max: dnsRetryMax}
	for {
		ev, ttl := s.Refresh(ctx)
		if ctx.Err() != nil {
			return nil
		}
		deliver(ev)
		wait := RefreshAfter(ttl)
		// A refusal that is not about the records' values (resolver down,
		// an oversized answer) backs off; one whose every record was
		// quarantined is asked again on its TTL.
		if ev.Err != nil && !errors.Is(ev.Err, ErrAllRejected) {
			wait = retry.next()
		} else {
			retry.reset()
		}
		ok := false
		if s.o.Wait != nil {
			ok = s.o.Wait(ctx, wait)
		} else {
			ok = sleep(ctx, t, wait)
		}
		if !ok {
			return nil
		}
	}
}

// RefreshAfter is the wait before the next query for an answer whose
// shortest TTL is ttl seconds: ttl bounded to [MinDNSRefresh, MaxDNSRefresh].
func RefreshAfter(ttl uint32) time.Duration {
	d := time.Duration(ttl) * time.Second
	return min(max(d, MinDNSRefresh), MaxDNSRefresh)
}

// Refresh queries once and returns the complete state with the shortest
// TTL (seconds) seen in the answers it used.
func (s *DNSSource) Refresh(ctx context.Context) (Event, uint32) {
	ev := Event{Source: s.Name()}
	server := s.o.Resolver
	if server == "" {
		var err error
		if server, err = systemResolver(); err != nil {
			s.connected.Store(false)
			ev.Err = &PayloadError{Code: CodeUnavailable, Detail: err.Error(), err: ErrUnavailable}
			return ev, 0
		}
	}
	q := querier{server: server, timeout: s.o.Timeout, ttl: ^uint32(0)}
	var recs []DNSRecord
	var err error
	if s.o.SRV != "" {
		recs, err = q.srv(ctx, s.o.SRV, s.o.Zone)
	} else {
		recs, err = q.addresses(ctx, s.o.Host, s.o.Port, s.o.Weight, s.o.Zone)
	}
	if err != nil {
		s.connected.Store(false)
		var pe *PayloadError
		if !errors.As(err, &pe) {
			pe = &PayloadError{Code: CodeUnavailable, Detail: err.Error(), err: ErrUnavailable}
		}
		ev.Err = pe
		return ev, 0
	}
	s.connected.Store(true)
	ev.Update, ev.Err = RecordsUpdate(recs, s.o.Limits)
	if q.ttl == ^uint32(0) {
		q.ttl = uint32(dnsNegativeRefresh / time.Second)
	}
	return ev, q.ttl
}

// systemResolver is the first nameserver of /etc/resolv.conf as ip:port.
func systemResolver() (string, error) {
	cc, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		return "", fmt.Errorf("reading the system resolver: %w", err)
	}
	if len(cc.Servers) == 0 {
		return "", fmt.Errorf("reading the system resolver: %s names no nameserver", resolvConf)
	}
	return net.JoinHostPort(cc.Servers[0], cc.Port), nil
}

// DNSRecord is one instance a DNS answer gave: an IP address, its port,
// its weight in whole units (Drained: weight 0.01, for a SRV weight of 0
// beside non-zero ones) and zone.
type DNSRecord struct {
	IP     netip.Addr
	Port   uint16
	Weight uint32
	Zone   string
}

// RecordsUpdate passes records through the discovery firewall, as a
// registry list of the same instances would be: an address given twice is
// a duplicate (the first kept), a weight over Limits.MaxWeight is
// quarantined as too_large, a port 0 as bad_address, a bad zone as
// bad_zone. No records is a valid empty update. Work is linear in
// len(recs).
func RecordsUpdate(recs []DNSRecord, limits Limits) (Update, error) {
	var b strings.Builder
	b.Grow(2 + len(recs)*64)
	b.WriteByte('[')
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"address":`)
		b.WriteString(strconv.Quote(netip.AddrPortFrom(r.IP.Unmap(), r.Port).String()))
		b.WriteString(`,"weight":`)
		if r.Weight == srvTinyWeight {
			b.WriteString("0.01")
		} else {
			b.WriteString(strconv.FormatUint(uint64(r.Weight), 10))
		}
		if r.Zone != "" {
			b.WriteString(`,"zone":`)
			b.WriteString(strconv.Quote(r.Zone))
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return ParseList([]byte(b.String()), limits)
}

// srvTinyWeight marks a DNSRecord whose SRV weight was 0 beside non-zero
// weights in its tier: served at 0.01, the smallest weight levee has
// (RFC 2782: "a very small chance of being selected"). Out of the range
// of a SRV weight (0..65535), so no real weight is mistaken for it.
const srvTinyWeight = ^uint32(0)

// SRVTarget is one SRV record of an answer.
type SRVTarget struct {
	Priority, Weight, Port uint16
	Target                 string
}

// SRVTier picks the records levee uses from a SRV answer: those of the
// lowest priority value only (RFC 2782: higher values are tried only when
// every lower one is unreachable; levee's health checks and retries play
// that part among the tier's endpoints, so the backup tiers are left
// out). Weight mapping: every weight 0 in the tier means equal weights
// (1 each); otherwise a weight 0 is 0.01 and others are taken as whole
// units (then bounded by max_weight in the firewall). A target of "."
// (the service is decidedly not available) is dropped. The result keeps
// answer order; work is linear in len(rs).
func SRVTier(rs []SRVTarget) []SRVTarget {
	lowest, found := uint16(0), false
	for _, r := range rs {
		if r.Target == "." {
			continue
		}
		if !found || r.Priority < lowest {
			lowest, found = r.Priority, true
		}
	}
	var tier []SRVTarget
	allZero := true
	for _, r := range rs {
		if r.Target != "." && r.Priority == lowest {
			tier = append(tier, r)
			allZero = allZero && r.Weight == 0
		}
	}
	if allZero {
		for i := range tier {
			tier[i].Weight = 1
		}
	}
	// A weight 0 left here becomes srvTinyWeight in srvWeight.
	return tier
}

// srvWeight is a tier record's DNSRecord weight.
func srvWeight(w uint16) uint32 {
	if w == 0 {
		return srvTinyWeight
	}
	return uint32(w)
}

// querier runs one refresh's queries against one server and keeps the
// shortest TTL seen.
type querier struct {
	server  string
	timeout time.Duration
	ttl     uint32
}

// srv resolves a SRV name and its tier's targets.
func (q *querier) srv(ctx context.Context, name, zone string) ([]DNSRecord, error) {
	rrs, err := q.query(ctx, name, dns.TypeSRV)
	if err != nil {
		return nil, err
	}
	all := make([]SRVTarget, 0, len(rrs))
	for _, rr := range rrs {
		if s, ok := rr.(*dns.SRV); ok {
			all = append(all, SRVTarget{Priority: s.Priority, Weight: s.Weight, Port: s.Port, Target: s.Target})
		}
	}
	tier := SRVTier(all)
	resolved := map[string][]netip.Addr{}
	var out []DNSRecord
	for _, t := range tier {
		target := strings.ToLower(dns.Fqdn(t.Target))
		ips, ok := resolved[target]
		if !ok {
			if len(resolved) == maxSRVTargets {
				return nil, payloadErr(ErrTooLarge, CodeTooManyInstances, "SRV answer for %s names more than %d targets", name, maxSRVTargets)
			}
			if ips, err = q.ips(ctx, target); err != nil {
				return nil, err
			}
			resolved[target] = ips
		}
		for _, ip := range ips {
			out = append(out, DNSRecord{IP: ip, Port: t.Port, Weight: srvWeight(t.Weight), Zone: zone})
		}
	}
	return out, nil
}

// addresses resolves a host's A and AAAA records.
func (q *querier) addresses(ctx context.Context, host string, port uint16, weight uint32, zone string) ([]DNSRecord, error) {
	ips, err := q.ips(ctx, host)
	if err != nil {
		return nil, err
	}
	out := make([]DNSRecord, 0, len(ips))
	for _, ip := range ips {
		out = append(out, DNSRecord{IP: ip, Port: port, Weight: weight, Zone: zone})
	}
	return out, nil
}

// ips are a name's A then AAAA addresses, in answer order.
func (q *querier) ips(ctx context.Context, name string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, t := range [...]uint16{dns.TypeA, dns.TypeAAAA} {
		rrs, err := q.query(ctx, name, t)
		if err != nil {
			return nil, err
		}
		for _, rr := range rrs {
			var ip net.IP
			switch v := rr.(type) {
			case *dns.A:
				ip = v.A
			case *dns.AAAA:
				ip = v.AAAA
			}
			if a, ok := netip.AddrFromSlice(ip); ok {
				out = append(out, a.Unmap())
			}
		}
	}
	return out, nil
}

// query asks the server for name's records of type t (over TCP when the
// UDP answer is truncated) and returns the answer's records of that type
// (CNAMEs leading to them are followed by the resolver and skipped here).
// NXDOMAIN and NOERROR with no records are no records, with the SOA's
// negative TTL if the server sent one; any other rcode, a network error
// or a timeout is an error wrapping ErrUnavailable.
func (q *querier) query(ctx context.Context, name string, t uint16) ([]dns.RR, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), t)
	m.SetEdns0(dnsUDPSize, false)
	c := &dns.Client{Net: "udp", Timeout: q.timeout, UDPSize: dnsUDPSize}
	r, _, err := c.ExchangeContext(ctx, m, q.server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.ExchangeContext(ctx, m, q.server)
	}
	what := dns.TypeToString[t] + " " + name
	if err != nil {
		return nil, &PayloadError{Code: CodeUnavailable, Detail: fmt.Sprintf("resolving %s at %s: %v", what, q.server, err), err: ErrUnavailable}
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return nil, &PayloadError{Code: CodeUnavailable, Detail: fmt.Sprintf("resolving %s at %s: %s", what, q.server, dns.RcodeToString[r.Rcode]), err: ErrUnavailable}
	}
	if len(r.Answer) > maxDNSAnswer {
		return nil, payloadErr(ErrTooLarge, CodeTooManyInstances, "answer for %s holds %d records, more than %d", what, len(r.Answer), maxDNSAnswer)
	}
	var out []dns.RR
	for _, rr := range r.Answer {
		if rr.Header().Rrtype == t {
			out = append(out, rr)
			q.ttl = min(q.ttl, rr.Header().Ttl)
		}
	}
	if len(out) == 0 {
		for _, rr := range r.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				q.ttl = min(q.ttl, soa.Minttl, soa.Hdr.Ttl)
			}
		}
	}
	return slices.Clip(out), nil
}
