package drill

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/adminclient"
)

func TestOptionsCheck(t *testing.T) {
	c, err := adminclient.New("127.0.0.1:1", "")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Admin: c}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	if o.Rate != DefaultRate || o.Duration != DefaultDuration || o.Prefix != "/_levee_drill/" || o.Data != "http://127.0.0.1:8080" || o.Upstream != "levee-drill" {
		t.Errorf("defaults: %+v", o)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Admin: c, Rate: MaxRate + 1}, "-rate 1001: want 100 to 1000"},
		{Options{Admin: c, Rate: 99}, "-rate 99"},
		{Options{Admin: c, Duration: MaxDuration + time.Second}, "-duration 1m1s: want 2s to 1m0s"},
		{Options{Admin: c, Duration: time.Second}, "-duration 1s"},
		{Options{Admin: c, Data: "ftp://x"}, `-data "ftp://x"`},
		{Options{Admin: c, Prefix: "x/"}, `-prefix "x/": must begin with /`},
		{Options{}, "no admin client"},
	} {
		if err := c.o.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

func TestRunRefusesUnknownDrill(t *testing.T) {
	c, _ := adminclient.New("127.0.0.1:1", "")
	if _, err := Run(context.Background(), Options{Admin: c}, []string{"zero-weight", "nope"}); err == nil || !strings.Contains(err.Error(), `unknown drill "nope"`) {
		t.Errorf("got %v", err)
	}
	if !Known("retry-storm") || Known("nope") || len(List()) != 5 {
		t.Errorf("Known/List: %v", List())
	}
}

func TestTallyP99(t *testing.T) {
	tl := &tally{status: map[string]int{}}
	for i := 1; i <= 200; i++ {
		tl.latencies = append(tl.latencies, time.Duration(i)*time.Millisecond)
	}
	if got := tl.p99(); got != 198 {
		t.Errorf("p99 of 1..200 ms = %g, want 198", got)
	}
	tl.latencies = []time.Duration{7 * time.Millisecond}
	if got := tl.p99(); got != 7 {
		t.Errorf("p99 of one = %g", got)
	}
}

// TestMetricSums reads a real Prometheus text page over HTTP.
func TestMetricSums(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`# HELP levee_discovery_rejected_total x
levee_discovery_rejected_total{reason="not_a_number",upstream="levee-drill"} 1
levee_discovery_rejected_total{reason="not_finite",upstream="levee-drill"} 2
levee_discovery_rejected_total{reason="not_finite",upstream="other"} 40
levee_discovery_rejected_total_extra{upstream="levee-drill"} 100
process_cpu_seconds_total 1.25
`))
	}))
	defer srv.Close()
	c, _ := adminclient.New(srv.URL, "")
	e := newEnv(Options{Admin: c}, "t")
	if v, err := e.metric(context.Background(), "levee_discovery_rejected_total", `upstream="levee-drill"`); err != nil || v != 3 {
		t.Errorf("rejected: %g %v", v, err)
	}
	if v := e.cpuSeconds(context.Background()); v != 1.25 {
		t.Errorf("cpu: %g", v)
	}
}

// TestPrepareRefusesBusyUpstream: a drill upstream with endpoints (another
// drill, or not a drill upstream) or not fed by push is refused.
func TestPrepareRefusesBusyUpstream(t *testing.T) {
	body := `{"discovery":{"source":"push"},"endpoints_total":2}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	c, _ := adminclient.New(srv.URL, "")
	e := newEnv(Options{Admin: c, Upstream: "levee-drill"}, "t")
	if err := e.prepare(context.Background(), false); err == nil || !strings.Contains(err.Error(), "has 2 endpoints") {
		t.Errorf("busy: %v", err)
	}
	body = `{"discovery":{"source":"file"},"endpoints_total":0}`
	if err := e.prepare(context.Background(), false); err == nil || !strings.Contains(err.Error(), "discovery: {push: true}") {
		t.Errorf("file-fed: %v", err)
	}
}
