// Package prometheus holds levee's shipped Prometheus alert rules
// (levee.rules.yaml) and their promtool unit tests; this file checks both
// with Debian's promtool and holds the rules to the runbook and the metric
// catalogue. internal/gateway's TestAlertsFireInPrometheus proves them
// against a real levee and a real Prometheus.
package prometheus

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/testsvc"
	"gopkg.in/yaml.v3"
)

// requiredAlerts are the alerts issue 18 names; the rules may have more.
var requiredAlerts = []string{
	"LeveeUpstreamDown", "LeveeHighErrorRate", "LeveeOverloadShedding", "LeveeAppThrottled",
	"LeveeMemoryPressure", "LeveeDiscoveryQuarantine", "LeveeConfigReloadFailed",
}

const runbookURL = "https://github.com/levee-gw/levee/blob/main/docs/runbook.md#"

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile("levee.rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var rules []rule
	for _, g := range doc.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

func promtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(testsvc.Promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

// TestAlertRules: the rules load in Prometheus 2.42 (promtool check rules)
// and pass their unit tests (promtool test rules).
func TestAlertRules(t *testing.T) {
	promtool(t, "check", "rules", "levee.rules.yaml")
	promtool(t, "test", "rules", "levee.rules_test.yaml")
}

// TestAlertRulesComplete: every required alert is there with a severity,
// a summary, a description and a runbook_url whose section exists in
// docs/runbook.md; each has a unit test that sees it both silent and
// firing; and each levee metric a rule reads is in docs/metrics.md.
func TestAlertRulesComplete(t *testing.T) {
	rules := loadRules(t)
	runbook, err := os.ReadFile("../../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	metricsDoc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("levee.rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var testDoc struct {
		Tests []struct {
			Alerts []struct {
				Name string `yaml:"alertname"`
				Exp  []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(tests, &testDoc); err != nil {
		t.Fatal(err)
	}
	silent, firing := map[string]bool{}, map[string]bool{}
	for _, tc := range testDoc.Tests {
		for _, a := range tc.Alerts {
			if len(a.Exp) == 0 {
				silent[a.Name] = true
			} else {
				firing[a.Name] = true
			}
		}
	}
	metricName := regexp.MustCompile(`\blevee_[a-z0-9_]+`)
	var names []string
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		names = append(names, r.Alert)
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		if want := runbookURL + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		if !strings.Contains(string(runbook), "\n## "+r.Alert+"\n") {
			t.Errorf("%s: docs/runbook.md has no section \"## %s\"", r.Alert, r.Alert)
		}
		if !silent[r.Alert] || !firing[r.Alert] {
			t.Errorf("%s: levee.rules_test.yaml must see it silent (%v) and firing (%v)", r.Alert, silent[r.Alert], firing[r.Alert])
		}
		for _, m := range metricName.FindAllString(r.Expr, -1) {
			if !strings.Contains(string(metricsDoc), "`"+m+"`") {
				t.Errorf("%s reads %s, which docs/metrics.md does not list", r.Alert, m)
			}
		}
	}
	for _, a := range requiredAlerts {
		if !slices.Contains(names, a) {
			t.Errorf("alert %s is missing from levee.rules.yaml", a)
		}
	}
}
