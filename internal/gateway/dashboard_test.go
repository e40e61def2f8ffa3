package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-gw/levee/internal/testsvc"
)

// dashboardPath is the shipped Grafana dashboard (issue 18, item 6).
const dashboardPath = "../../deploy/grafana/levee.json"

// dashboard is the part of Grafana's JSON model the test reads.
type dashboard struct {
	SchemaVersion int              `json:"schemaVersion"`
	UID           string           `json:"uid"`
	Panels        []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// selectorRE finds a metric selector: a metric name and its braces. Every
// selector in the dashboard carries the $instance filter, which the test
// also checks, so a metric written without braces cannot slip past it.
var selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)

// TestGrafanaDashboard (issue 18, item 6): deploy/grafana/levee.json is a
// Grafana JSON model of schemaVersion 36 or later whose panels have unique
// ids and fit the 24-column grid; every PromQL expression in it parses
// (promtool check rules, each expression as a recording rule: Prometheus
// 2.42's own parser), filters by the $instance variable, and uses only
// metric families levee registers (asked of a running levee's registry:
// registering a probe of that name is refused exactly when the name is
// taken, so families with no series yet count too).
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.SchemaVersion < 36 || d.UID == "" {
		t.Errorf("schemaVersion %d, uid %q: want 36 or later and a uid", d.SchemaVersion, d.UID)
	}
	ids := map[int]string{}
	var exprs []string
	for _, p := range d.Panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos x %d w %d does not fit 24 columns", p.Title, p.GridPos.X, p.GridPos.W)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	if len(exprs) < 20 {
		t.Fatalf("%d expressions: the dashboard lost its panels", len(exprs))
	}

	// Each expression with Grafana's variables as Grafana substitutes them.
	grafana := strings.NewReplacer("$__rate_interval", "1m", "$instance", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	used := map[string]bool{}
	for i, e := range exprs {
		sels := selectorRE.FindAllStringSubmatch(e, -1)
		for _, s := range sels {
			if !strings.Contains(s[2], `instance=~"$instance"`) {
				t.Errorf("expression %q: selector %s{%s} does not filter by $instance", e, s[1], s[2])
			}
			used[s[1]] = true
		}
		if rest := selectorRE.ReplaceAllString(e, ""); regexp.MustCompile(`\b(levee|go|process)_[a-z_]+`).MatchString(rest) {
			t.Errorf("expression %q names a metric outside a selector with braces", e)
		}
		q, _ := json.Marshal(grafana.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: dashboard:expr_%d\n        expr: %s\n", i, q)
	}
	promtool := testsvc.Promtool(t)
	file := filepath.Join(t.TempDir(), "dashboard.rules.yaml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's expressions: %v\n%s", err, out)
	}

	// The families levee registers: a levee with routes, an upstream, a
	// data source and a memory limit, so that every package has registered
	// its own.
	db, _ := sqliteOrders(t)
	h := start(t, "memory: {limit: 1GiB}\n"+dataGatewayYAML(db, filepath.Join(t.TempDir(), "state")))
	reg := h.g.Registry()
	names := make([]string, 0, len(used))
	for name := range used {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
		if !registered(reg, family) {
			t.Errorf("the dashboard uses %s, which levee does not register", name)
		}
	}
	t.Logf("%d panels, %d expressions, %d metric names checked", len(d.Panels), len(exprs), len(names))
}

// registered reports whether reg holds a metric family named name: a probe
// collector describing that name is refused (AlreadyRegisteredError, or a
// descriptor clash for a different help or label set) exactly when it is.
func registered(reg *prometheus.Registry, name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})
	if err := reg.Register(probe); err != nil {
		var are prometheus.AlreadyRegisteredError
		return errors.As(err, &are) || strings.Contains(err.Error(), "previously registered descriptor with the same fully-qualified name")
	}
	reg.Unregister(probe)
	return false
}
