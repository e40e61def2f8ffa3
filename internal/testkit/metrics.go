package testkit

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one reading of a Prometheus text page: each series, spelled
// as the page spells it (name{label="value",...}, labels in the page's
// order, which client_golang sorts by name), and its value.
type Metrics struct {
	series map[string]float64
}

// maxMetricsPage bounds the page Scrape reads (64 MiB).
const maxMetricsPage = 64 << 20

// Scrape reads url (a /metrics page) with a 10 s timeout and fails t when
// it cannot, answers other than 200, or holds a line it cannot parse.
func Scrape(t testing.TB, url string) *Metrics {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsPage))
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: status %d: %.200s", url, resp.StatusCode, body)
	}
	return Parse(t, string(body))
}

// Gather reads what g (a prometheus.Registry) exposes, as Scrape would.
func Gather(t testing.TB, g prometheus.Gatherer) *Metrics {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("gathering metrics: status %d: %.200s", rec.Code, rec.Body.String())
	}
	return Parse(t, rec.Body.String())
}

// Parse reads a Prometheus text page, failing t on a line it cannot parse.
func Parse(t testing.TB, page string) *Metrics {
	t.Helper()
	m, err := ParsePage(page)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ParsePage reads a Prometheus text page: comment lines and blank lines
// are skipped, every other line is a series, a space, a value and an
// optional timestamp.
func ParsePage(page string) (*Metrics, error) {
	m := &Metrics{series: map[string]float64{}}
	for n, line := range strings.Split(page, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		key, rest, err := splitSeries(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %v", n+1, line, err)
		}
		val, _, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: value: %v", n+1, line, err)
		}
		m.series[key] = v
	}
	return m, nil
}

// splitSeries splits a sample line after its series: the name, then the
// label set when there is one (quoted values may hold '}', spaces and
// escaped quotes).
func splitSeries(line string) (series, rest string, err error) {
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return "", "", fmt.Errorf("no series name")
	}
	if line[i] == ' ' {
		return line[:i], line[i:], nil
	}
	inQuote := false
	for j := i + 1; j < len(line); j++ {
		switch c := line[j]; {
		case inQuote && c == '\\':
			j++ // the escaped character
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			if j+1 >= len(line) || line[j+1] != ' ' {
				return "", "", fmt.Errorf("no space after the labels")
			}
			return line[:j+1], line[j+1:], nil
		}
	}
	return "", "", fmt.Errorf("unterminated label set")
}

// Lookup returns series' value and whether the page has it.
func (m *Metrics) Lookup(series string) (float64, bool) {
	v, ok := m.series[series]
	return v, ok
}

// Value returns series' value, failing t when the page does not have it
// (never 0 for an absent series), naming the family's series it has.
func (m *Metrics) Value(t testing.TB, series string) float64 {
	t.Helper()
	v, ok := m.series[series]
	if !ok {
		t.Fatalf("metrics: no series %s (the page has %s)", series, m.describe(series))
	}
	return v
}

// Absent fails t when the page has series.
func (m *Metrics) Absent(t testing.TB, series string) {
	t.Helper()
	if v, ok := m.series[series]; ok {
		t.Fatalf("metrics: series %s = %v, want it absent", series, v)
	}
}

// Family returns the series of family name (name alone or with labels,
// not the _bucket/_sum/_count of a histogram unless asked for), keyed by
// their label set ("" for none, else "{...}" as the page spells it).
func (m *Metrics) Family(name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m.series {
		if k == name {
			out[""] = v
		} else if rest, ok := strings.CutPrefix(k, name); ok && strings.HasPrefix(rest, "{") {
			out[rest] = v
		}
	}
	return out
}

// describe lists the series of series' family, for a failure message (at
// most 20).
func (m *Metrics) describe(series string) string {
	name, _, _ := strings.Cut(series, "{")
	fam := m.Family(name)
	if len(fam) == 0 {
		return "no series of " + name
	}
	keys := make([]string, 0, len(fam))
	for k := range fam {
		keys = append(keys, name+k)
	}
	sort.Strings(keys)
	if len(keys) > 20 {
		keys = append(keys[:20], "...")
	}
	return strings.Join(keys, ", ")
}
