package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
)

// TestDecideRetry: the retry decision as a table, from the transport's
// error (or the upstream's status) to whether the attempt is sent again
// and whether that retry is free of the retry budget. Only an attempt that
// reached no backend (connect refused, connect timeout) is free; it is
// still bounded by attempts.
func TestDecideRetry(t *testing.T) {
	pol := &RetryPolicy{Attempts: 3, OnConnectFailure: true, OnStatus: []int{502, 503, 504}}
	withReset := &RetryPolicy{Attempts: 3, OnConnectFailure: true, OnResetBeforeResponse: true, OnStatus: []int{503}}
	noConnect := &RetryPolicy{Attempts: 3, OnStatus: []int{503}}
	get, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	post, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader("b"))
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		name        string
		pol         *RetryPolicy
		n           int
		r           *http.Request
		err         error
		status      int
		held        *untouchedBody
		retry, free bool
	}{
		{"refused, GET", pol, 1, get, refused, 0, nil, true, true},
		{"refused, POST (nothing sent)", pol, 1, post, refused, 0, nil, true, true},
		{"refused, last attempt", pol, 3, get, refused, 0, nil, false, false},
		{"refused, second of three", pol, 2, get, refused, 0, nil, true, true},
		{"connect timeout", pol, 1, get, dialTimeout, 0, nil, true, true},
		{"refused, streamed body partly read", pol, 1, post, refused, 0, &untouchedBody{read: true}, false, false},
		{"refused, streamed body untouched", pol, 1, post, refused, 0, &untouchedBody{}, true, true},
		{"refused, policy without connect_failure", noConnect, 1, get, refused, 0, nil, false, false},
		{"refused, no policy", nil, 1, get, refused, 0, nil, false, false},
		{"reset, not listed", pol, 1, get, reset, 0, nil, false, false},
		{"reset, listed: spends the budget", withReset, 1, get, reset, 0, nil, true, false},
		{"reset, listed, POST", withReset, 1, post, reset, 0, nil, false, false},
		{"EOF, listed", withReset, 1, get, io.EOF, 0, nil, true, false},
		{"read timeout counts as 504", pol, 1, get, readTimeout, 0, nil, true, false},
		{"503: spends the budget", pol, 1, get, nil, 503, nil, true, false},
		{"500 not listed", pol, 1, get, nil, 500, nil, false, false},
		{"200", pol, 1, get, nil, 200, nil, false, false},
	} {
		fail := failure("")
		if tc.err != nil {
			fail = classifyFailure(context.Background(), tc.err)
		}
		retry, free := decideRetry(tc.pol, tc.n, tc.r, fail, tc.status, tc.held)
		if retry != tc.retry || free != tc.free {
			t.Errorf("%s (failure %q): retry %v free %v, want %v %v", tc.name, fail, retry, free, tc.retry, tc.free)
		}
	}
}

// TestNoteRefused: only a refused connection marks the endpoint.
func TestNoteRefused(t *testing.T) {
	now := time.Now()
	ep := endpoint.New("10.0.0.1:80", 100)
	noteRefused(ep, &net.OpError{Op: "dial", Err: os.ErrDeadlineExceeded}, now)
	noteRefused(ep, io.EOF, now)
	if ep.Stats.RefusedSince(0) {
		t.Fatal("a connect timeout or EOF marked the endpoint refused")
	}
	noteRefused(ep, &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, now)
	if !ep.Stats.RefusedSince(now.UnixNano()) || !ep.Stats.TakeRefused() {
		t.Fatal("ECONNREFUSED did not mark the endpoint")
	}
}

// zonedUpstream is zone a (local, share 1) and zone b (share 0) as the
// gateway builds them: a Zoned picker and the tiers' endpoints.
func zonedUpstream() (*Balance, []*endpoint.Endpoint, []*endpoint.Endpoint) {
	a := []*endpoint.Endpoint{endpoint.New("10.0.0.1:80", 100), endpoint.New("10.0.0.2:80", 100), endpoint.New("10.0.0.3:80", 100)}
	b := []*endpoint.Endpoint{endpoint.New("10.0.1.1:80", 100), endpoint.New("10.0.1.2:80", 100)}
	for _, e := range append(append([]*endpoint.Endpoint{}, a...), b...) {
		e.Zone = map[bool]string{true: "a", false: "b"}[e.Address < "10.0.1"]
	}
	z := balance.NewZoned([]balance.Picker{balance.NewSmoothWeighted(a), balance.NewSmoothWeighted(b)}, []float64{1, 0})
	all := append(append([]*endpoint.Endpoint{}, a...), b...)
	return &Balance{Endpoints: all, Picker: z, Tiers: [][]*endpoint.Endpoint{a, b}}, a, b
}

// TestPickRetryLeavesDeadZone: a retry never goes to an endpoint that
// failed in its request; while zone a has one left untried it stays in
// zone a (its share is 1), and once every zone-a endpoint failed (or
// refused a connection lately) it goes to zone b; with every endpoint
// failed it takes the picker's choice. No allocation.
func TestPickRetryLeavesDeadZone(t *testing.T) {
	now := time.Now()
	up, a, b := zonedUpstream()
	inB := func(ep *endpoint.Endpoint) bool { return ep == b[0] || ep == b[1] }

	var tried triedSet
	tried.add(a[0])
	for range 100 {
		ep, err := pickRetry(up, &tried, now)
		if err != nil || ep == a[0] || inB(ep) {
			t.Fatalf("one of zone a failed: retry went to %v (%v), want another zone-a endpoint", ep.Address, err)
		}
	}
	tried.add(a[1])
	tried.add(a[2])
	seen := map[*endpoint.Endpoint]int{}
	for range 200 {
		ep, err := pickRetry(up, &tried, now)
		if err != nil || !inB(ep) {
			t.Fatalf("all of zone a failed: retry went to %v (%v), want zone b", ep.Address, err)
		}
		seen[ep]++
	}
	if seen[b[0]] < 50 || seen[b[1]] < 50 {
		t.Errorf("zone b's endpoints got %d and %d of 200 retries, want both about half", seen[b[0]], seen[b[1]])
	}

	// One failed here, the other two refused lately (another request's
	// attempts): zone b.
	var one triedSet
	one.add(a[0])
	a[1].Stats.Refused(now.UnixNano())
	a[2].Stats.Refused(now.UnixNano())
	if ep, _ := pickRetry(up, &one, now); !inB(ep) {
		t.Fatalf("the rest of zone a refused lately: retry went to %s, want zone b", ep.Address)
	}
	// A refusal older than refusedMemory no longer counts.
	if ep, _ := pickRetry(up, &one, now.Add(2*refusedMemory)); inB(ep) || ep == a[0] {
		t.Fatalf("old refusals: retry went to %s, want a[1] or a[2]", ep.Address)
	}

	for _, e := range b {
		tried.add(e)
	}
	if ep, err := pickRetry(up, &tried, now); err != nil || ep == nil {
		t.Fatalf("every endpoint failed: %v, %v; want the picker's choice", ep, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = pickRetry(up, &one, now) }); n != 0 {
		t.Errorf("pickRetry allocates %v times per call", n)
	}

	// Without zones, the upstream's endpoints form the one tier.
	flat := &Balance{Endpoints: a, Picker: balance.NewSmoothWeighted(a[:1])}
	var t0 triedSet
	t0.add(a[0])
	if ep, _ := pickRetry(flat, &t0, now.Add(2*refusedMemory)); ep == a[0] {
		t.Fatal("flat upstream: retry went back to the failed endpoint although others serve")
	}
}

// TestTriedSetBounded: the set holds at most maxTried addresses, once each.
func TestTriedSetBounded(t *testing.T) {
	var s triedSet
	e := endpoint.New("10.0.0.1:80", 1)
	s.add(e)
	s.add(e)
	if s.n != 1 {
		t.Fatalf("duplicate added: n = %d", s.n)
	}
	for i := range 2 * maxTried {
		s.add(endpoint.New(net.JoinHostPort("10.0.0.2", string(rune('a'+i))), 1))
	}
	if s.n != maxTried {
		t.Fatalf("n = %d, want %d", s.n, maxTried)
	}
}

// TestClientBodyRemembersReadError: the wrapper keeps the first error
// other than EOF; clientGone tells a dead connection from a bad body.
func TestClientBodyRemembersReadError(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, "http://x/", io.MultiReader(strings.NewReader("ab"), errReader{io.ErrUnexpectedEOF}))
	r.ContentLength = -1 // unknown, as a chunked request's
	cb := watchClientBody(nil, r, 0)
	if cb == nil || r.Body != cb {
		t.Fatal("body not wrapped")
	}
	_, err := io.ReadAll(r.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(cb.failure(), io.ErrUnexpectedEOF) {
		t.Fatalf("read %v, remembered %v", err, cb.failure())
	}
	ok, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader("fine"))
	cb = watchClientBody(nil, ok, 0)
	_, _ = io.ReadAll(ok.Body)
	if cb.failure() != nil {
		t.Fatalf("EOF remembered as a failure: %v", cb.failure())
	}
	get, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	if watchClientBody(nil, get, 0) != nil || (*clientBody)(nil).failure() != nil {
		t.Fatal("a bodiless request was wrapped")
	}
	if clientGone(io.ErrUnexpectedEOF) || !clientGone(&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}) {
		t.Fatal("clientGone misjudges")
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
