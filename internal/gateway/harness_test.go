package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/testkit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	goleak.VerifyTestMain(m)
}

// harness is one levee started from a config file on disk, with its
// listeners on ephemeral loopback ports.
type harness struct {
	t       *testing.T
	g       *Gateway
	cfgPath string
	base    string // http://data-addr
	admin   string // http://admin-addr
	client  *http.Client
	logs    *lockedBuffer
}

// start writes yaml (which must use listen/admin.listen 127.0.0.1:0) and
// starts levee on it; Cleanup drains it.
func start(t *testing.T, yaml string) *harness {
	t.Helper()
	h, _ := startStoppable(t, yaml)
	h.base = "http://" + h.g.Addr().String()
	return h
}

// startStoppable is start without h.base (for configs whose listeners
// are named) and with the drain handed back: stop drains levee once, for
// a test that stops a node midway; Cleanup calls it too.
func startStoppable(t *testing.T, yaml string) (h *harness, stop func()) {
	t.Helper()
	dir := t.TempDir()
	h = &harness{t: t, cfgPath: filepath.Join(dir, "levee.yaml"), logs: &lockedBuffer{}}
	h.writeConfig(yaml)
	g, err := New(Options{Load: func() (*config.Config, error) { return config.Load(h.cfgPath) }, LogOutput: h.logs})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := g.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	h.g = g
	h.admin = "http://" + g.AdminAddr().String()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	h.client = &http.Client{Transport: adminTokenTransport{g: g, next: tr}, Timeout: 30 * time.Second}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			tr.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := g.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return h, stop
}

// writeConfig writes yaml as the config file. Without a state_dir in
// yaml, one under the config's directory is added, so that the app store
// (and any snapshot) stays out of the source tree.
func (h *harness) writeConfig(yaml string) {
	h.t.Helper()
	if !strings.Contains(yaml, "state_dir:") {
		yaml = "state_dir: " + filepath.Join(filepath.Dir(h.cfgPath), "state") + "\n" + yaml
	}
	tmp := h.cfgPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, h.cfgPath); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) get(path string, hdr ...string) *http.Response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.base+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

// metric returns series' value on the admin /metrics page (series as
// the page spells it: name{label="value",...}, labels sorted by name),
// failing the test when the page does not have it: an absent series is
// not read as 0.
func (h *harness) metric(series string) float64 {
	h.t.Helper()
	return testkit.Parse(h.t, h.metricsPage()).Value(h.t, series)
}

// lookupMetric returns series' value and whether the page has it, for a
// poll on a series that appears with its first count.
func (h *harness) lookupMetric(series string) (float64, bool) {
	h.t.Helper()
	return testkit.Parse(h.t, h.metricsPage()).Lookup(series)
}

// metricIs reports whether the page has series at want: for a poll, in
// which a series not there yet (registered or first counted a moment
// later) is "not yet", not a failure; the poll's deadline fails the test
// if it never comes.
func (h *harness) metricIs(series string, want float64) bool {
	h.t.Helper()
	v, ok := h.lookupMetric(series)
	return ok && v == want
}

// noCount asserts that series counted nothing: it is absent (a labelled
// series of a vector appears with its first count) or 0. So that a
// misspelt series cannot pass as absent, its family and label names must
// be ones docs/metrics.md lists (TestMetricsCatalogue holds that list to
// the registry).
func (h *harness) noCount(series string) {
	h.t.Helper()
	name, labels, _ := strings.Cut(series, "{")
	want, ok := documented(h.t)[name]
	if !ok {
		h.t.Fatalf("%s: no family %s in docs/metrics.md", series, name)
	}
	var got []string
	for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
		if k, _, ok := strings.Cut(kv, "="); ok {
			got = append(got, k)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		h.t.Fatalf("%s: labels %v, docs/metrics.md gives %s the labels %v", series, got, name, want)
	}
	if v, ok := h.lookupMetric(series); ok && v != 0 {
		h.t.Errorf("%s = %v, want it absent or 0 (nothing counted)", series, v)
	}
}

// metricsPage returns the admin /metrics page.
func (h *harness) metricsPage() string {
	h.t.Helper()
	resp, err := h.client.Get(h.admin + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(body)
}

// refusal is levee's JSON refusal body.
type refusal struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// expectRefusal asserts status, JSON content type and reason, and closes
// the body.
func expectRefusal(t *testing.T, resp *http.Response, status int, reason string) {
	t.Helper()
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d (body %q)", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var r refusal
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("body %q is not JSON: %v", body, err)
	}
	if r.Reason != reason || r.Error == "" {
		t.Errorf("body = %+v, want reason %q and an error sentence", r, reason)
	}
	if (status == 503 || status == 429) && resp.Header.Get("Retry-After") == "" {
		t.Errorf("status %d without Retry-After", status)
	}
}

// backend is a real upstream server on loopback that names itself.
func backend(t *testing.T, name string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Backend", name)
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// hangingBackend accepts requests and answers none until the client gives
// up (or 5 s pass).
func hangingBackend(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func hostPort(srv *httptest.Server) string { return strings.TrimPrefix(srv.URL, "http://") }

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// lockedBuffer collects levee's log output; safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// generatedToken returns the admin token g generated under state_dir
// (admin.token: generate), "" when it uses configured tokens or none.
func generatedToken(g *Gateway) string {
	a := g.token.Load()
	if a == nil || a.generated == "" {
		return ""
	}
	tok, err := config.ReadTokenFile(a.generated)
	if err != nil {
		panic(err) // levee read it at start
	}
	return tok
}

// adminTokenTransport sends the generated admin token on requests to g's
// admin listener that carry no Authorization, as an operator's CLI
// does, so that tests written before the token existed keep calling the
// admin API as they did.
type adminTokenTransport struct {
	g    *Gateway
	next http.RoundTripper
}

func (t adminTokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == t.g.AdminAddr().String() && req.Header.Get("Authorization") == "" {
		if tok := generatedToken(t.g); tok != "" {
			req = req.Clone(req.Context())
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	return t.next.RoundTrip(req)
}
