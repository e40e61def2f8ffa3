package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/client"
	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/memguard"
	"github.com/levee-gw/levee/internal/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// memRig: levee with a memory guard of 1,000,000 bytes (soft 0.8, hard
// 0.9: reservations fit up to 800,000 sheddable, 900,000 normal, 950,000
// critical) whose live heap the test sets, in front of an upstream that
// answers 503 to the first attempt of each request (so a replayable body
// is sent twice) and records what it received.
type memRig struct {
	t      *testing.T
	g      *memguard.Guard
	front  *httptest.Server
	client *http.Client

	mu       sync.Mutex
	bodies   []int   // length of each body the upstream received
	reserved []int64 // the guard's reservations while each arrived
	seen     sync.Map
}

const memReplayLimit = 512 << 10

func newMemRig(t *testing.T, live uint64) *memRig {
	g, err := memguard.New(memguard.Options{Limit: 1_000_000, SoftWatermark: 0.8, HardWatermark: 0.9,
		Heap: func() (uint64, uint64) { return live, 1 }, Collect: func() {}})
	if err != nil {
		t.Fatal(err)
	}
	g.Sample()
	mr := &memRig{t: t, g: g}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		mr.mu.Lock()
		mr.bodies = append(mr.bodies, len(b))
		mr.reserved = append(mr.reserved, g.Reserved())
		mr.mu.Unlock()
		if r.URL.Path == "/abort" {
			w.Header().Set("Content-Length", "100")
			w.Write([]byte("short"))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		// Every attempt carries the request's id: the first to arrive is
		// refused.
		if _, seen := mr.seen.LoadOrStore(r.Header.Get("X-Request-Id"), true); !seen {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(up.Close)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	tr := upstream.NewTransport(defaultOpts())
	t.Cleanup(tr.Close)
	ep := endpoint.New(up.Listener.Addr().String(), 1)
	upstream := (&Upstream{Name: "up", Transport: tr}).WithBalance(&Balance{Endpoints: []*endpoint.Endpoint{ep}, Picker: balance.NewSmoothWeighted([]*endpoint.Endpoint{ep})})
	pol := &RetryPolicy{Attempts: 2, OnStatus: []int{503}, ReplayBodyLimit: memReplayLimit, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}
	var routes []*Route
	for _, p := range []struct {
		name string
		prio admission.Priority
	}{{"normal", admission.Normal}, {"critical", admission.Critical}, {"sheddable", admission.Sheddable}} {
		routes = append(routes, &Route{Name: p.name, PathPrefix: "/" + p.name + "/", Upstream: upstream, Retry: pol, Priority: p.prio})
	}
	routes = append(routes, &Route{Name: "abort", PathPrefix: "/abort", Upstream: upstream, Retry: pol})
	h, err := NewHandler(NewTable(routes, []*Upstream{upstream}, m), Options{Metrics: m, Memory: g})
	if err != nil {
		t.Fatal(err)
	}
	mr.front = httptest.NewServer(h)
	ctr := &http.Transport{}
	mr.client = &http.Client{Transport: ctr, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		ctr.CloseIdleConnections()
		mr.front.Close()
	})
	return mr
}

// put sends a body of n bytes (chunked when chunked is set) to path and
// returns the status and the refusal reason, if any.
func (mr *memRig) put(path string, n int, chunked bool, hdr ...string) (int, string) {
	mr.t.Helper()
	var body io.Reader = bytes.NewReader(make([]byte, n))
	if chunked {
		body = io.MultiReader(body) // hides the length: sent chunked
	}
	req, err := http.NewRequest(http.MethodPut, mr.front.URL+path, body)
	if err != nil {
		mr.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := mr.client.Do(req)
	if err != nil {
		mr.t.Fatalf("PUT %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var refusal struct{ Reason string }
	if resp.StatusCode != 200 {
		json.Unmarshal(b, &refusal)
	}
	return resp.StatusCode, refusal.Reason
}

// settled waits until every reservation is released (finish runs just
// after the answer is written) and returns what the upstream saw.
func (mr *memRig) settled() (bodies []int, reserved []int64) {
	mr.t.Helper()
	eventually(mr.t, "reservations released", func() bool { return mr.g.Reserved() == 0 })
	mr.mu.Lock()
	defer mr.mu.Unlock()
	bodies, reserved = mr.bodies, mr.reserved
	mr.bodies, mr.reserved = nil, nil
	return bodies, reserved
}

// TestReplayReservesTheBody: a body with a Content-Length reserves exactly
// that length while it is held, is replayed after a 503, and the
// reservation is released when the request ends.
func TestReplayReservesTheBody(t *testing.T) {
	mr := newMemRig(t, 100_000)
	if code, reason := mr.put("/normal/x", 300_000, false); code != 200 {
		t.Fatalf("PUT: %d %s, want 200 after one retry", code, reason)
	}
	bodies, reserved := mr.settled()
	if len(bodies) != 2 || bodies[0] != 300_000 || bodies[1] != 300_000 {
		t.Fatalf("upstream got bodies %v, want the 300,000 bytes twice", bodies)
	}
	for i, r := range reserved {
		if r != 300_000 {
			t.Errorf("attempt %d: %d bytes reserved, want exactly the body's 300,000", i+1, r)
		}
	}
}

// TestReplayUnknownLengthReservesWhatItHolds: a chunked body reserves the
// replay limit while it is read, then only what its buffer holds.
func TestReplayUnknownLengthReservesWhatItHolds(t *testing.T) {
	mr := newMemRig(t, 100_000)
	if code, reason := mr.put("/normal/x", 100_000, true); code != 200 {
		t.Fatalf("PUT: %d %s, want 200 after one retry", code, reason)
	}
	bodies, reserved := mr.settled()
	if len(bodies) != 2 || bodies[0] != 100_000 || bodies[1] != 100_000 {
		t.Fatalf("upstream got bodies %v, want the 100,000 bytes twice", bodies)
	}
	for i, r := range reserved {
		if r < 100_000 || r > 2*100_000 {
			t.Errorf("attempt %d: %d bytes reserved, want the buffer's capacity (100,000 to 200,000)", i+1, r)
		}
	}
	// Over the replay limit, unknown length: the bytes read to find out
	// stay reserved while they wait to be sent, and the body streams.
	if code, reason := mr.put("/normal/x", memReplayLimit+10, true); code != 503 || reason != "" {
		t.Fatalf("PUT of a chunked body over the replay limit: %d %q, want the upstream's 503 (not retried)", code, reason)
	}
	if bodies, reserved = mr.settled(); len(bodies) != 1 || bodies[0] != memReplayLimit+10 || reserved[0] != memReplayLimit+1 {
		t.Fatalf("upstream got bodies %v with %v reserved, want one of %d with %d reserved", bodies, reserved, memReplayLimit+10, memReplayLimit+1)
	}
}

// TestNoRoomByPriority: with the live heap at 700,000, a 200,000-byte
// body fits a normal request (900,000) but not a sheddable one (800,000),
// which is refused 503 memory_pressure before any byte goes upstream; a
// 230,000-byte body fits a critical request (950,000) but not a normal
// one, which streams once, unreplayed.
func TestNoRoomByPriority(t *testing.T) {
	mr := newMemRig(t, 700_000)
	if code, _ := mr.put("/normal/x", 200_000, false); code != 200 {
		t.Fatalf("normal, 200,000 bytes: %d, want 200 (replayed)", code)
	}
	if b, _ := mr.settled(); len(b) != 2 {
		t.Fatalf("normal, 200,000 bytes: upstream got %v, want two attempts", b)
	}

	refusedBefore := mr.g.RefusedReservations()
	if code, reason := mr.put("/sheddable/x", 200_000, false); code != 503 || reason != "memory_pressure" {
		t.Fatalf("sheddable, 200,000 bytes: %d %q, want 503 memory_pressure", code, reason)
	}
	if code, reason := mr.put("/normal/x", 200_000, false, "Levee-Attempt", "2"); code != 503 || reason != "memory_pressure" {
		t.Fatalf("a client's retry (sheddable), 200,000 bytes: %d %q, want 503 memory_pressure", code, reason)
	}
	if b, _ := mr.settled(); len(b) != 0 {
		t.Fatalf("sheddable requests without room reached the upstream: %v", b)
	}

	if code, _ := mr.put("/critical/x", 230_000, false); code != 200 {
		t.Fatalf("critical, 230,000 bytes: %d, want 200 (replayed)", code)
	}
	if b, r := mr.settled(); len(b) != 2 || r[0] != 230_000 {
		t.Fatalf("critical, 230,000 bytes: upstream got %v with %v reserved, want two attempts with 230,000", b, r)
	}
	for _, path := range []string{"/normal/x", "/critical/x"} {
		n := 230_000
		if path == "/critical/x" {
			n = 260_000
		}
		if code, reason := mr.put(path, n, false); code != 503 || reason != "" {
			t.Fatalf("%s, %d bytes without room: %d %q, want the upstream's own 503 (streamed, not replayed)", path, n, code, reason)
		}
		if b, r := mr.settled(); len(b) != 1 || b[0] != n || r[0] != 0 {
			t.Fatalf("%s, %d bytes without room: upstream got %v with %v reserved, want one attempt of the whole body, nothing reserved", path, n, b, r)
		}
	}
	if got := mr.g.RefusedReservations() - refusedBefore; got != 4 {
		t.Errorf("%d reservations refused, want 4", got)
	}
}

// TestReservationReleasedOnAbort: a request whose answer breaks off
// mid-body (the handler panics to abort the client's connection) still
// releases what it reserved.
func TestReservationReleasedOnAbort(t *testing.T) {
	mr := newMemRig(t, 0)
	req, _ := http.NewRequest(http.MethodPut, mr.front.URL+"/abort", strings.NewReader(strings.Repeat("x", 50_000)))
	if resp, err := mr.client.Do(req); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatal("a truncated answer was read as complete")
		}
	}
	if b, r := mr.settled(); len(b) != 1 || r[0] != 50_000 {
		t.Fatalf("upstream got %v with %v reserved, want one body of 50,000 with 50,000 reserved", b, r)
	}
}

// TestReservationReleasedWhenClientLeaves: a client that stops sending
// mid-body and goes away releases the replay limit reserved for its
// chunked body.
func TestReservationReleasedWhenClientLeaves(t *testing.T) {
	mr := newMemRig(t, 0)
	c, err := net.Dial("tcp", mr.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "PUT /normal/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n"+strings.Repeat("y", 0x1000)+"\r\n")
	eventually(t, "the replay limit reserved", func() bool { return mr.g.Reserved() == memReplayLimit+1 })
	c.Close()
	mr.settled()
}

// TestReadUpTo: the buffer of an unknown-length body is never larger than
// the body needs (doubling, but not past a power-of-two end), nor than the
// cap it is given.
func TestReadUpTo(t *testing.T) {
	for _, tc := range []struct {
		size, n  int
		len, cap int
	}{
		{0, 100, 0, 100},
		{4 << 10, 1 << 20, 4 << 10, 4 << 10},
		{4 << 20, 16 << 20, 4 << 20, 4 << 20},
		{4<<20 + 1, 16 << 20, 4<<20 + 1, 8 << 20},
		{5000, 5000, 5000, 5000},
		{5001, 5000, 5000, 5000},
		{1 << 20, 600_000, 600_000, 600_000},
	} {
		src := io.MultiReader(bytes.NewReader(make([]byte, tc.size)))
		buf, err := readUpTo(src, int64(tc.n))
		if err != nil || len(buf) != tc.len || cap(buf) != tc.cap {
			t.Errorf("readUpTo(%d bytes, %d): len %d cap %d err %v, want len %d cap %d", tc.size, tc.n, len(buf), cap(buf), err, tc.len, tc.cap)
		}
	}
}

// TestSignedBodyReserves (limit 10,000,000, normal ceiling 9,000,000): the
// body a signed request buffers to check its
// signature is reserved before it is read (its length, or for an unknown
// length what its buffer ends up holding), and without room the request
// is refused 503 memory_pressure without a byte read.
func TestSignedBodyReserves(t *testing.T) {
	var live uint64
	g, err := memguard.New(memguard.Options{Limit: 10_000_000, SoftWatermark: 0.8, HardWatermark: 0.9,
		Heap: func() (uint64, uint64) { return live, 1 }, Collect: func() {}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rt := &Route{Name: "all", PathPrefix: "/", Upstream: &Upstream{Name: "up"}, Auth: AuthHMAC}
	h, err := NewHandler(NewTable([]*Route{rt}, []*Upstream{rt.Upstream}, m), Options{Metrics: m, Memory: g})
	if err != nil {
		t.Fatal(err)
	}
	apps, keys := benchApps(t, 1)
	h.SwapApps(NewApps(apps, mustIndex(t, keys), nil))
	secret := sha256.Sum256([]byte(benchKey(0)))
	now := time.Now()
	signed := func(n int, chunked bool) (*http.Request, *countingReader) {
		body := make([]byte, n)
		src := &countingReader{r: bytes.NewReader(body)}
		r := httptest.NewRequest(http.MethodPost, "/x", src)
		r.ContentLength = int64(n)
		if chunked {
			r.ContentLength = -1
		}
		if err := client.Sign(r, keys[0].KeyID, secret[:], body, now); err != nil {
			t.Fatal(err)
		}
		return r, src
	}

	live = 100_000
	g.Sample()
	for _, tc := range []struct {
		n        int
		chunked  bool
		reserved int64
	}{{300_000, false, 300_000}, {100_000, true, 128 << 10}} {
		r, _ := signed(tc.n, tc.chunked)
		var x exchange
		if app, reason, detail := h.identify(r, &x, rt, h.Apps(), now); app == nil {
			t.Fatalf("%d bytes (chunked %v): refused %s %s", tc.n, tc.chunked, reason, detail)
		}
		if x.reserved != tc.reserved || g.Reserved() != tc.reserved {
			t.Errorf("%d bytes (chunked %v): %d reserved (guard %d), want %d", tc.n, tc.chunked, x.reserved, g.Reserved(), tc.reserved)
		}
		h.memory.release(&x)
		if g.Reserved() != 0 {
			t.Fatalf("%d bytes left reserved after the request", g.Reserved())
		}
	}

	live = 8_800_000 // + 300,000 passes the normal ceiling, 9,000,000
	g.Sample()
	r, src := signed(300_000, false)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), `"memory_pressure"`) {
		t.Fatalf("a signed 300,000-byte body without room: %d %s, want 503 memory_pressure", rec.Code, rec.Body)
	}
	if src.n != 0 || g.Reserved() != 0 {
		t.Fatalf("refused without room, yet %d body bytes were read and %d reserved", src.n, g.Reserved())
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
