package proxy

// Mirroring: a copy of a share of a route's forwarded requests goes to a
// shadow upstream, on a goroutine of its own, and the shadow's answer is
// read (up to mirrorAnswerBytes) and dropped. The copy never delays,
// fails or changes the primary's answer:
//
//   - the primary does not wait for it: ServeHTTP only decides, clones
//     the request and starts the goroutine (mirror), then forwards as
//     before;
//   - the primary's body is never read by it: only a request without a
//     body, or one whose body was already read whole before admission
//     (x.buffered, bufferBody: a known length within the route's
//     BufferBodyBytes), is copied, the two sharing the read-only bytes; a
//     streaming body (larger, or of unknown length) or a protocol switch is
//     not copied (skipped_body);
//   - it spends nothing of the primary's: no admission slot, no retry
//     budget, no endpoint of the primary's upstream. The shadow's own
//     Balance and Transport serve it (its endpoints count it, so the
//     shadow's passive health sees its failures; the primary's never do),
//     it is never retried, and its deadline is its own (Mirror.timeout,
//     under the Handler's mirror context, which CloseMirrors cancels).
//
// Shedding: a copy is the first thing levee gives up under pressure.
// Each Mirror has its own cap of copies in flight (skipped_cap), and a
// copy reserves mirrorOverhead plus its body from the memory budget at the
// sheddable class, and is skipped at any memory pressure at all
// (skipped_memory): it goes at the soft watermark, where sheddable
// requests start to be refused, and before any of them while its
// reservation does not fit.
//
// Which requests: a counter, not a coin. Request n of the Mirror's
// (counting every request that reaches the step) is chosen when
// floor(n*per/10000) > floor((n-1)*per/10000), so exactly per of every
// 10000 are chosen, evenly spread.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/memguard"
	"github.com/levee-gw/levee/internal/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// MirrorHeader marks every copy a Mirror sends ("Levee-Mirror: 1"), so
// that a shadow can tell a copy from real traffic; a client's own value
// is removed on every route (prepareBody), so no upstream takes a
// client's request for a copy.
const MirrorHeader = "Levee-Mirror"

// mirrorAnswerBytes bounds what is read of a shadow's answer before its
// connection is closed (a longer answer costs its connection, not time).
const mirrorAnswerBytes = 64 << 10

// mirrorOverhead is what a copy reserves from the memory budget besides
// its body: the cloned request, the goroutine and the answer's buffers.
const mirrorOverhead = 16 << 10

// The results of levee_mirror_requests_total.
const (
	mirrorSent          = iota // the shadow answered (any status)
	mirrorFailed               // no answer: no endpoint, connect, timeout, reset
	mirrorSkippedCap           // max_in_flight copies were in flight
	mirrorSkippedMemory        // memory pressure, or the reservation did not fit
	mirrorSkippedBody          // a streaming body or a protocol switch
	mirrorResults
)

var mirrorResultNames = [mirrorResults]string{"sent", "failed", "skipped_cap", "skipped_memory", "skipped_body"}

// MirrorOptions configure a Mirror.
type MirrorOptions struct {
	// Upstream is the shadow: another upstream of the same Table.
	Upstream *Upstream
	// PerTenThousand is how many of every 10000 requests are copied (1 to
	// 10000).
	PerTenThousand int
	// MaxInFlight caps the copies in flight (at least 1).
	MaxInFlight int
	// Timeout bounds each copy, from its start to the end of reading its
	// answer (greater than 0).
	Timeout time.Duration
	// Prev, when set, is the Mirror this one replaces on a reload: the two
	// share their count of copies in flight (so a reload does not lift the
	// cap while the old copies run) and their request counter.
	Prev *Mirror
}

// Mirror is a route's shadow copy (Route.Mirror). Immutable once placed
// in a Table but for its shared counters.
type Mirror struct {
	up      *Upstream
	per     uint64
	max     int64
	timeout time.Duration
	state   *mirrorState
	counts  [mirrorResults]prometheus.Counter // set by NewTable
}

// mirrorState is what a Mirror shares with the one it replaced.
type mirrorState struct {
	inflight atomic.Int64
	seq      atomic.Uint64
}

// NewMirror returns the Mirror o describes.
func NewMirror(o MirrorOptions) *Mirror {
	m := &Mirror{up: o.Upstream, per: uint64(min(max(o.PerTenThousand, 1), 10000)), max: int64(max(o.MaxInFlight, 1)), timeout: o.Timeout}
	if o.Prev != nil {
		m.state = o.Prev.state
	} else {
		m.state = &mirrorState{}
	}
	return m
}

// chosen reports whether the next request is copied (see the header).
func (m *Mirror) chosen() bool {
	if m.per >= 10000 {
		return true
	}
	n := m.state.seq.Add(1)
	return n*m.per/10000 != (n-1)*m.per/10000
}

// count counts one result. Without NewTable (a Mirror outside a Table)
// nothing is counted.
func (m *Mirror) count(result int) {
	if c := m.counts[result]; c != nil {
		c.Inc()
	}
}

// resolveMirrorMetrics resolves rt's mirror counters, from the start at 0.
func resolveMirrorMetrics(m *Metrics, rt *Route) {
	for i, name := range mirrorResultNames {
		rt.Mirror.counts[i] = m.mirrors.WithLabelValues(rt.Name, name)
	}
}

// mirrorSet is the Handler's mirror goroutines: their parent context and
// a count to wait for at shutdown (CloseMirrors).
type mirrorSet struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

func newMirrorSet() *mirrorSet {
	s := &mirrorSet{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// begin counts one more goroutine; false once closed.
func (s *mirrorSet) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// CloseMirrors ends every copy in flight (their contexts are cancelled)
// and waits for their goroutines; no copy starts after it. For shutdown.
func (h *Handler) CloseMirrors() {
	s := h.mirrors
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// mirror is step 6a: when m chooses r, a copy of r goes to the shadow on
// its own goroutine, unless the cap, the memory budget or the body say
// no (each counted). It returns at once; nothing it does reaches the
// primary's answer.
func (h *Handler) mirror(r *http.Request, x *exchange, m *Mirror) {
	if !m.chosen() {
		return
	}
	var body []byte
	if x.body != nil || upstream.IsUpgrade(r.Header) {
		if x.buffered == nil || int64(len(x.buffered)) != r.ContentLength || upstream.IsUpgrade(r.Header) {
			m.count(mirrorSkippedBody)
			return
		}
		body = x.buffered
	}
	if m.state.inflight.Add(1) > m.max {
		m.state.inflight.Add(-1)
		m.count(mirrorSkippedCap)
		return
	}
	cost := int64(mirrorOverhead + len(body))
	g := h.memory.guard
	if g != nil && (g.Level() != memguard.OK || !g.Reserve(cost, memguard.ClassSheddable)) {
		m.state.inflight.Add(-1)
		m.count(mirrorSkippedMemory)
		return
	}
	if !h.mirrors.begin() {
		m.state.inflight.Add(-1)
		if g != nil {
			g.Release(cost)
		}
		return
	}
	ctx, cancel := context.WithTimeout(h.mirrors.ctx, m.timeout)
	out := r.Clone(ctx) // its own header map and URL: the primary goes on changing r
	out.Body, out.ContentLength = nil, int64(len(body))
	out.Header[MirrorHeader] = mirrorMark
	delete(out.Header, "Expect")
	go h.mirrorCopy(ctx, cancel, m, out, body, cost, x.reqID, x.forwardedFor, x.client) // never x itself: it would escape
}

// mirrorCopy is a copy's goroutine: it sends the copy and counts the
// result, then gives back the copy's slot, reservation and context.
func (h *Handler) mirrorCopy(ctx context.Context, cancel context.CancelFunc, m *Mirror, out *http.Request, body []byte, cost int64, reqID, xff, client string) {
	defer h.mirrors.wg.Done()
	defer m.state.inflight.Add(-1)
	if g := h.memory.guard; g != nil {
		defer g.Release(cost)
	}
	defer cancel()
	m.count(m.send(ctx, out, body, reqID, xff, client))
}

var mirrorMark = []string{"1"}

// send makes the copy's one attempt at an endpoint of the shadow and reads
// its answer, up to mirrorAnswerBytes; it returns the result to count.
func (m *Mirror) send(ctx context.Context, r *http.Request, body []byte, reqID, xff, client string) int {
	ep, err := pick(m.up.Balance(), r, client)
	if err != nil {
		return mirrorFailed
	}
	r.Host = ep.Address
	var rc io.ReadCloser
	if len(body) > 0 {
		rc = io.NopCloser(bytes.NewReader(body))
	}
	ep.Begin()
	resp, err := m.up.Transport.Forward(ctx, r, upstream.Outbound{Addr: ep.Address, RequestID: reqID, ForwardedFor: xff, Body: rc, Length: int64(len(body))})
	if err != nil {
		ep.End(endpoint.Failure)
		return mirrorFailed
	}
	_, err = io.CopyN(io.Discard, resp.Body, mirrorAnswerBytes)
	resp.Body.Close()
	if err != nil && err != io.EOF {
		ep.End(endpoint.Failure) // the answer broke off
		return mirrorFailed
	}
	ep.EndStatus(resp.StatusCode)
	return mirrorSent
}
