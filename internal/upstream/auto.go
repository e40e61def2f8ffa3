package upstream

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// errNoH2 is the h2 pool's dial error when an endpoint of a ProtoAuto
// upstream chose http/1.1 by ALPN (the connection is closed: the request
// then goes over HTTP/1.1 on a connection of the standard transport).
var errNoH2 = errors.New("upstream: the endpoint chose http/1.1 by ALPN")

// autoMemoryTTL is how long an auto upstream's endpoint that chose
// http/1.1 is sent HTTP/1.1 without asking again (an endpoint upgraded to
// h2 is then used as such within this time).
const autoMemoryTTL = time.Minute

// autoMemory remembers the endpoints that chose http/1.1 by ALPN, each
// until autoMemoryTTL after it said so. Bounded by the upstream's
// endpoints: an entry is added only for an endpoint a request was sent
// to, and removed when found expired.
type autoMemory struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (m *autoMemory) has(addr string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.until[addr]
	if ok && !now.Before(u) {
		delete(m.until, addr)
		return false
	}
	return ok
}

func (m *autoMemory) add(addr string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.until == nil {
		m.until = map[string]time.Time{}
	}
	m.until[addr] = now.Add(autoMemoryTTL)
}

// forwardH2 sends one attempt over the HTTP/2 pool; with ProtoAuto, an
// endpoint that chose http/1.1 gets it over the standard transport.
func (t *Transport) forwardH2(ctx context.Context, r *http.Request, o Outbound) (*http.Response, error) {
	out := OutboundRequest(ctx, r, o)
	out.Proto, out.ProtoMajor, out.ProtoMinor = "HTTP/2.0", 2, 0
	var start time.Time
	if o.Timing != nil {
		start = time.Now()
	}
	resp, err := t.h2.roundTrip(out, o.Addr, t.responseHeader)
	if errors.Is(err, errNoH2) && t.auto {
		t.h1Only.add(o.Addr, time.Now())
		out.Proto, out.ProtoMajor, out.ProtoMinor = "HTTP/1.1", 1, 1
		out.URL.Scheme = "http"
		return t.std.RoundTrip(out)
	}
	if err != nil {
		return nil, asTLSError(err)
	}
	if o.Timing != nil {
		*o.Timing = Timing{FirstByte: time.Since(start)} // dial included: the pool's dials are not told apart
	}
	return resp, nil
}
