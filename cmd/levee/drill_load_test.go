//go:build !race

// The drills judge success ratios and p99 latency under load: a load test
// (LOAD_TESTS in the Makefile), built without the race detector.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/adminclient"
)

// drillConfig is a levee with the drill upstream and route; defences
// false leaves out what the drills check: the route identifies no app
// (so app limits cannot apply) and the upstream has no retries.
func drillConfig(t *testing.T, defences bool) (cfg, tokenFile string) {
	dir := t.TempDir()
	tokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("drill-test-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	retry, auth := "retry: {attempts: 3, on: [connect_failure, reset_before_response]}", "api_key"
	if !defences {
		retry, auth = "retry: ~", "none"
	}
	cfg = writeFile(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token_file: %s}
state_dir: %s
upstreams:
  levee-drill:
    discovery: {push: true}
    %s
routes:
  - {name: levee-drill, match: {path_prefix: /_levee_drill/}, upstream: levee-drill, auth: %s}
`, tokenFile, filepath.Join(dir, "state"), retry, auth))
	return cfg, tokenFile
}

type drillOutput struct {
	Held   bool `json:"held"`
	Drills []struct {
		Name    string `json:"name"`
		Held    bool   `json:"held"`
		Figures []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
			Unit  string  `json:"unit"`
		} `json:"figures"`
		Failed  []string `json:"failed"`
		Error   string   `json:"error"`
		Cleanup []string `json:"cleanup_errors"`
	} `json:"drills"`
}

func runDrill(t *testing.T, p *process, tokenFile string) (int, drillOutput, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run([]string{"drill", "run", "zero-weight", "retry-storm", "dying-endpoint", "--json",
		"-admin", p.admin, "-token-file", tokenFile, "-data", p.data, "-duration", "4s"}, &out, &errOut)
	var doc drillOutput
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("drill output is not JSON (exit %d): %q\n%s", code, out.String(), errOut.String())
	}
	for _, d := range doc.Drills {
		for _, f := range d.Figures {
			t.Logf("%s: %s = %g %s", d.Name, f.Name, f.Value, f.Unit)
		}
		for _, f := range d.Failed {
			t.Logf("%s: FAILED %s", d.Name, f)
		}
	}
	return code, doc, errOut.String()
}

// assertCleanedUp checks the drills left nothing behind: no endpoints in
// the drill upstream, no drill apps.
func assertCleanedUp(t *testing.T, p *process, tokenFile string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run([]string{"apps", "list", "-all", "-admin", p.admin, "-token-file", tokenFile}, &out, &errOut); code != 0 {
		t.Fatalf("apps list: %d %s", code, errOut.String())
	}
	if strings.Contains(out.String(), "levee-drill-") {
		t.Errorf("drill apps left behind: %s", out.String())
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := adminclient.New(p.admin, strings.TrimSpace(string(token)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(context.Background(), "GET", "/api/v1/upstreams/levee-drill", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp), `"endpoints_total": 0`) {
		t.Errorf("drill endpoints left behind: %s", resp)
	}
}

// TestDrillAgainstLevee runs levee drill against a levee with the
// defences: every drill holds, exit 0, and nothing is left behind.
func TestDrillAgainstLevee(t *testing.T) {
	cfg, tokenFile := drillConfig(t, true)
	p := startProcess(t, "run", "-config", cfg)
	code, doc, stderr := runDrill(t, p, tokenFile)
	if code != 0 || !doc.Held || len(doc.Drills) != 3 {
		t.Fatalf("drill: exit %d, held %v, %d drills; stderr:\n%s", code, doc.Held, len(doc.Drills), stderr)
	}
	for _, d := range doc.Drills {
		if !d.Held || len(d.Figures) == 0 {
			t.Errorf("%s: held %v, %d figures", d.Name, d.Held, len(d.Figures))
		}
	}
	assertCleanedUp(t, p, tokenFile)
}

// TestDrillWithoutDefences runs it against a levee whose drill route
// names no app and whose upstream does not retry: exit 1, naming the
// retry storm's missing 429s and the dying endpoint's client failures.
func TestDrillWithoutDefences(t *testing.T) {
	cfg, tokenFile := drillConfig(t, false)
	p := startProcess(t, "run", "-config", cfg)
	code, doc, stderr := runDrill(t, p, tokenFile)
	if code != 1 || doc.Held {
		t.Fatalf("drill: exit %d, held %v; stderr:\n%s", code, doc.Held, stderr)
	}
	failed := map[string]string{}
	for _, d := range doc.Drills {
		if !d.Held {
			failed[d.Name] = strings.Join(d.Failed, "; ") + d.Error
		}
	}
	if !strings.Contains(failed["retry-storm"], "got 429 for 0% of its requests") {
		t.Errorf("retry-storm: %q", failed["retry-storm"])
	}
	if !strings.Contains(failed["dying-endpoint"], "client requests failed after an endpoint died") {
		t.Errorf("dying-endpoint: %q", failed["dying-endpoint"])
	}
	if _, bad := failed["zero-weight"]; bad {
		t.Errorf("zero-weight failed without an app limit or retries: %q", failed["zero-weight"])
	}
	assertCleanedUp(t, p, tokenFile)
}
