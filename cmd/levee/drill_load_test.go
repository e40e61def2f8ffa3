//go:build !race

// The drills judge success ratios and p99 latency under load: a load test
// (LOAD_TESTS in the Makefile), built without the race detector.

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

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
	code := run([]string{"drill", "run", "zero-weight", "retry-storm", "overload", "dying-endpoint", "registry-down", "--json",
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

// TestDrillAgainstLevee runs levee drill against a levee with the
// defences: every drill holds, exit 0, and nothing is left behind.
func TestDrillAgainstLevee(t *testing.T) {
	cfg, tokenFile := drillConfig(t, true)
	p := startProcess(t, "run", "-config", cfg)
	begin := time.Now()
	code, doc, stderr := runDrill(t, p, tokenFile)
	t.Logf("all %d drills in %s", len(doc.Drills), time.Since(begin).Round(time.Millisecond))
	if code != 0 || !doc.Held || len(doc.Drills) != 5 {
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
// names no app and whose upstream neither retries nor limits concurrency:
// exit 1, naming the retry storm's missing 429s, the overload's missing
// refusals and unbounded queue and the dying endpoint's client failures.
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
	if !strings.Contains(failed["overload"], "nothing was refused") || !strings.Contains(failed["overload"], "queue without bound") {
		t.Errorf("overload: %q", failed["overload"])
	}
	// The registry firewall and the last good set cannot be turned off:
	// these two hold without the other defences.
	for _, n := range []string{"zero-weight", "registry-down"} {
		if _, bad := failed[n]; bad {
			t.Errorf("%s failed without an app limit or retries: %q", n, failed[n])
		}
	}
	assertCleanedUp(t, p, tokenFile)
}
