package proxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/testkit"
	"github.com/levee-gw/levee/internal/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// rig is levee's handler serving a real loopback listener ("front") in
// front of one upstream endpoint at addr, with a client of its own.
type rig struct {
	t      *testing.T
	tr     *upstream.Transport
	ep     *endpoint.Endpoint
	reg    *prometheus.Registry
	front  *httptest.Server
	client *http.Client
}

func defaultOpts() upstream.Options {
	return upstream.Options{Connect: time.Second, ResponseHeader: 5 * time.Second, Idle: time.Minute, MaxIdlePerEndpoint: 8}
}

// newRig builds the handler for the endpoint at addr. std routes every
// request through the standard http.Transport instead of the fast path.
func newRig(t testing.TB, addr string, o upstream.Options, std bool) *rig {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	tr := upstream.NewTransport(o)
	ep := endpoint.New(addr, 1)
	up := (&Upstream{Name: "up", Transport: tr}).WithBalance(&Balance{Endpoints: []*endpoint.Endpoint{ep}, Picker: balance.NewSmoothWeighted([]*endpoint.Endpoint{ep})})
	if std {
		up.Transport = tr.Standard()
	}
	rt := &Route{Name: "all", PathPrefix: "/", Upstream: up}
	h, err := NewHandler(NewTable([]*Route{rt}, []*Upstream{up}, m), Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(h)
	ctr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	r := &rig{tr: tr, ep: ep, reg: reg, front: front, client: &http.Client{Transport: ctr, Timeout: 10 * time.Second}}
	if tt, ok := t.(*testing.T); ok {
		r.t = tt
	}
	t.Cleanup(func() {
		ctr.CloseIdleConnections()
		front.Close()
		tr.Close()
	})
	return r
}

// get sends a request through levee and returns the status, the body and
// the response (its body already read and closed).
func (r *rig) do(req *http.Request) (int, string, *http.Response) {
	r.t.Helper()
	resp, err := r.client.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		r.t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, string(body), resp
}

func (r *rig) get(path string) (int, string, *http.Response) {
	r.t.Helper()
	return r.do(r.req(http.MethodGet, path))
}

func (r *rig) req(method, path string) *http.Request {
	r.t.Helper()
	req, err := http.NewRequest(method, r.front.URL+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return req
}

// requests returns levee_requests_total for code.
func (r *rig) requests(code string) float64 {
	r.t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "levee_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// countingServer is an httptest upstream that counts the TCP connections it
// accepted and closed.
type countingServer struct {
	*httptest.Server
	opened, closed atomic.Int64
}

func newCountingServer(t *testing.T, h http.Handler) *countingServer {
	s := &countingServer{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *countingServer) addr() string { return s.Listener.Addr().String() }

// eventually polls cond every few milliseconds for up to 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Until(t, 5*time.Second, what, cond)
}

var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Length", "5")
	io.WriteString(w, "hello")
})
