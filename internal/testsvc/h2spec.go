package testsvc

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// H2specVersion is the h2spec (github.com/summerwind/h2spec, the HTTP/2
// conformance tester) that scripts/install-services.sh builds from
// tools/h2spec (its own module, so levee's go.mod does not grow) into
// H2specPath.
const H2specVersion = "v2.2.1"

// H2specPath is where scripts/install-services.sh puts the h2spec binary:
// $LEVEE_TOOLS_DIR, or $XDG_CACHE_HOME/levee-tools, or
// ~/.cache/levee-tools, then h2spec-<H2specVersion>/h2spec (the directory
// HydraPath uses).
func H2specPath() string {
	return filepath.Join(filepath.Dir(filepath.Dir(HydraPath())), "h2spec-"+H2specVersion, "h2spec")
}

// H2specCase is one case of an h2spec run: its section ("http2/4.2"), its
// number within the section (from 1, as h2spec prints it), its
// description, and what h2spec expected and saw when it failed.
type H2specCase struct {
	Section string
	Number  int
	Name    string
	Failure string
}

// ID is "http2/4.2/3", the form h2spec's -h and docs/http2.md use.
func (c H2specCase) ID() string { return c.Section + "/" + strconv.Itoa(c.Number) }

// H2specReport is the outcome of an h2spec run, from its JUnit report.
type H2specReport struct {
	Total, Passed   int
	Failed, Skipped []H2specCase
}

// RunH2spec runs h2spec with args (the target: -h, -p, -t, -k, -o ...)
// and a JUnit report in a temporary file, bounded by limit, and returns
// the parsed report. h2spec's exit status is 1 when a case fails, so it
// is not an error here; no report is. Its output is in the error then.
func RunH2spec(t testing.TB, limit time.Duration, args ...string) H2specReport {
	t.Helper()
	bin := H2specPath()
	if _, err := os.Stat(bin); err != nil {
		if requireServices() {
			t.Fatalf("h2spec is not built at %s: run scripts/install-services.sh", bin)
		}
		t.Skipf("h2spec is not built at %s (scripts/install-services.sh builds it; make test requires it)", bin)
	}
	report := filepath.Join(t.TempDir(), "h2spec.xml")
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, append(args, "-j", report)...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("h2spec %v: not done within %v: %s", args, limit, lastLines(string(out), 20))
	}
	f, err := os.Open(report)
	if err != nil {
		t.Fatalf("h2spec %v wrote no report (%v): %s", args, err, lastLines(string(out), 20))
	}
	defer f.Close()
	r, err := ParseH2specReport(f)
	if err != nil {
		t.Fatalf("h2spec %v: %v", args, err)
	}
	return r
}

// junitSuites is the part of h2spec's JUnit report read here.
type junitSuites struct {
	Suites []struct {
		Package string `xml:"package,attr"`
		Cases   []struct {
			Name    string    `xml:"classname,attr"`
			Error   *junitMsg `xml:"error"`
			Failure *junitMsg `xml:"failure"`
			Skipped *junitMsg `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitMsg struct {
	Text string `xml:",chardata"`
}

// maxReportBytes bounds the report read (h2spec's is about 40 KB).
const maxReportBytes = 4 << 20

// ParseH2specReport reads h2spec's JUnit report (-j): a case with an
// <error> or <failure> failed, one with <skipped> was skipped.
func ParseH2specReport(r io.Reader) (H2specReport, error) {
	var s junitSuites
	if err := xml.NewDecoder(io.LimitReader(r, maxReportBytes)).Decode(&s); err != nil {
		return H2specReport{}, fmt.Errorf("h2spec report: %w", err)
	}
	var rep H2specReport
	for _, su := range s.Suites {
		for i, c := range su.Cases {
			rep.Total++
			switch {
			case c.Error != nil || c.Failure != nil:
				msg := c.Error
				if msg == nil {
					msg = c.Failure
				}
				rep.Failed = append(rep.Failed, H2specCase{Section: su.Package, Number: i + 1, Name: c.Name, Failure: msg.Text})
			case c.Skipped != nil:
				rep.Skipped = append(rep.Skipped, H2specCase{Section: su.Package, Number: i + 1, Name: c.Name, Failure: c.Skipped.Text})
			default:
				rep.Passed++
			}
		}
	}
	if rep.Total == 0 {
		return rep, fmt.Errorf("h2spec report has no test cases")
	}
	return rep, nil
}
