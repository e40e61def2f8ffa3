package proxy

import (
	"bufio"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/netlimit"
)

var updateRefusalDocs = flag.Bool("update-refusal-docs", false,
	"rewrite the generated refusal tables in README.md and docs/configuration.md from reasonTable")

// TestReasonTableWellFormed: one row per reason, each a snake_case name
// with a client or server error status, a sentence and a "when".
func TestReasonTableWellFormed(t *testing.T) {
	name := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[Reason]bool{}
	for _, s := range reasonTable {
		if seen[s.Reason] {
			t.Errorf("%s: two rows", s.Reason)
		}
		seen[s.Reason] = true
		if !name.MatchString(string(s.Reason)) {
			t.Errorf("%q: not snake_case", s.Reason)
		}
		for _, st := range []int{s.Status, s.AltStatus} {
			if st != 0 && (st < 400 || st > 599 || http.StatusText(st) == "") {
				t.Errorf("%s: status %d", s.Reason, st)
			}
		}
		if s.Status == 0 || s.Sentence == "" || s.When == "" || strings.ContainsAny(s.When+s.Sentence, "|\n") {
			t.Errorf("%s: row %+v (needs a status, a sentence and a when, without | or newlines)", s.Reason, s)
		}
		if s.Shed && s.Listener {
			t.Errorf("%s: both shed by admission and written by the listener", s.Reason)
		}
		if _, ok := reasonIndex[s.Reason]; !ok {
			t.Errorf("%s: no cached metric slot", s.Reason)
		}
	}
}

// TestEveryAdmissionReasonHasRefusal: every reason admission.Acquire can
// refuse with is a shed reason the proxy answers with its own refusal (a
// missing one would reach the client as a 500 "internal"), with a status
// and Retry-After, and is named in levee_shed_total's help.
func TestEveryAdmissionReasonHasRefusal(t *testing.T) {
	rs := admission.Reasons()
	if len(rs) == 0 {
		t.Fatal("admission lists no reasons")
	}
	for _, ar := range rs {
		r := Reason(ar)
		i, ok := reasonIndex[r]
		if !ok {
			t.Errorf("admission reason %q has no row in reasonTable", ar)
			continue
		}
		s := reasonTable[i]
		if !s.Shed || s.Listener || s.RetryAfter != retryAfterSoon {
			t.Errorf("%s: row %+v, want a shed reason Refuse writes with Retry-After", r, s)
		}
		rec := httptest.NewRecorder()
		if got := RefuseRetryAfter(rec, r, 3*time.Second); got != s.Status || rec.Header().Get("Retry-After") != "3" {
			t.Errorf("%s: RefuseRetryAfter wrote %d with Retry-After %q, want %d with 3", r, got, rec.Header().Get("Retry-After"), s.Status)
		}
		if !strings.Contains(shedHelp(), string(r)) {
			t.Errorf("%s: not named in levee_shed_total's help %q", r, shedHelp())
		}
	}
}

// TestListenerRefusalsMatchTable: the answers netlimit writes over real
// sockets carry the statuses, reason, sentence and Retry-After of their
// row (netlimit imports nothing of levee's, so this test holds it to the
// table).
func TestListenerRefusalsMatchTable(t *testing.T) {
	var s reasonSpec
	for _, row := range reasonTable {
		if row.Listener {
			if s.Reason != "" {
				t.Fatalf("two listener reasons; this test knows netlimit's one")
			}
			s = row
		}
	}
	if s.Reason != ReasonConnectionLimit {
		t.Fatalf("listener reason %q, want %q", s.Reason, ReasonConnectionLimit)
	}
	for _, tc := range []struct {
		name        string
		max, perIP  int
		status      int
		sentenceIsS bool
	}{
		{"total cap", 1, 0, s.Status, true},
		{"per-address cap", 0, 1, s.AltStatus, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := netlimit.LimitPerIP(raw, tc.max, tc.perIP, nil)
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
			done := make(chan struct{})
			go func() { defer close(done); srv.Serve(ln) }()
			defer func() { srv.Close(); <-done }()
			dial := func() (net.Conn, *http.Response) {
				c, err := net.Dial("tcp", raw.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				return c, resp
			}
			held, first := dial()
			defer held.Close()
			first.Body.Close()
			c, resp := dial()
			defer c.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var body struct{ Error, Reason string }
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("body %q: %v", b, err)
			}
			if resp.StatusCode != tc.status || body.Reason != string(s.Reason) || body.Error == "" ||
				(tc.sentenceIsS && body.Error != s.Sentence) {
				t.Errorf("got %d %+v, want %d reason %s sentence %q", resp.StatusCode, body, tc.status, s.Reason, s.Sentence)
			}
			if want := map[retryAfterKind]string{retryAfterSoon: "1"}[s.RetryAfter]; resp.Header.Get("Retry-After") != want {
				t.Errorf("Retry-After %q, want %q", resp.Header.Get("Retry-After"), want)
			}
		})
	}
}

// Markers around each generated table in the docs.
const (
	refusalTableBegin = "<!-- refusal table: generated from reasonTable in internal/proxy/refusal.go; `go test ./internal/proxy -run TestRefusalTablesInDocs -update-refusal-docs` rewrites it -->\n"
	refusalTableEnd   = "<!-- end of refusal table -->\n"
)

// refusalTableMarkdown renders the rows keep selects as the docs' table.
func refusalTableMarkdown(keep func(reasonSpec) bool) string {
	var b strings.Builder
	b.WriteString("| status | reason | Retry-After | when |\n| --- | --- | --- | --- |\n")
	for _, s := range reasonTable {
		if !keep(s) {
			continue
		}
		status := strconv.Itoa(s.Status)
		if s.AltStatus != 0 {
			status += " / " + strconv.Itoa(s.AltStatus)
		}
		retry := map[retryAfterKind]string{noRetryAfter: "no", retryAfterSoon: "yes", retryAfterCaller: "exact"}[s.RetryAfter]
		b.WriteString("| " + status + " | `" + string(s.Reason) + "` | " + retry + " | " + s.When + " |\n")
	}
	return b.String()
}

// TestRefusalTablesInDocs: README.md's refusal table (every reason) and
// docs/configuration.md's (the ones admission control, the memory guard
// and the connection caps give) are the ones generated from reasonTable.
// With -update-refusal-docs it rewrites them instead.
func TestRefusalTablesInDocs(t *testing.T) {
	for _, doc := range []struct {
		path string
		keep func(reasonSpec) bool
	}{
		{"../../README.md", func(reasonSpec) bool { return true }},
		{"../../docs/configuration.md", func(s reasonSpec) bool { return s.Shed || s.Listener }},
	} {
		raw, err := os.ReadFile(doc.path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		before, rest, ok1 := strings.Cut(text, refusalTableBegin)
		current, after, ok2 := strings.Cut(rest, refusalTableEnd)
		if !ok1 || !ok2 {
			t.Errorf("%s: no generated refusal table (between the lines %q and %q)", doc.path, strings.TrimSpace(refusalTableBegin), strings.TrimSpace(refusalTableEnd))
			continue
		}
		want := refusalTableMarkdown(doc.keep)
		if current == want {
			continue
		}
		if *updateRefusalDocs {
			if err := os.WriteFile(doc.path, []byte(before+refusalTableBegin+want+refusalTableEnd+after), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: the refusal table is not the one generated from reasonTable; run `go test ./internal/proxy -run TestRefusalTablesInDocs -update-refusal-docs`.\nwant:\n%s", doc.path, want)
	}
}

// TestRefusalMetricsEveryReason: a route counts every reason of the table
// in levee_refusals_total, and the shed ones in levee_shed_total too, each
// from a counter it resolves once and caches.
func TestRefusalMetricsEveryReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	rm := newRouteMetrics(m, "r", "u")
	for _, s := range reasonTable {
		rm.refused(s.Reason)
		if s.Shed {
			rm.shed(s.Reason)
		}
		i := reasonIndex[s.Reason]
		if rm.refusals[i].Load() == nil || (s.Shed && rm.sheds[i].Load() == nil) {
			t.Errorf("%s: counter not cached", s.Reason)
		}
		if got := testutil.ToFloat64(m.refusals.WithLabelValues("r", string(s.Reason))); got != 1 {
			t.Errorf("%s: levee_refusals_total %v, want 1", s.Reason, got)
		}
		want := map[bool]float64{true: 1}[s.Shed]
		if got := testutil.ToFloat64(m.shedTotal.WithLabelValues("r", string(s.Reason))); got != want {
			t.Errorf("%s: levee_shed_total %v, want %v", s.Reason, got, want)
		}
	}
}
