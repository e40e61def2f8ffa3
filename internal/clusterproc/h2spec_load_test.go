//go:build !race

package clusterproc

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// h2specMinPassed is issue 24's bar: h2spec against levee's TLS listener
// keeps at least 141 of its 145 cases. levee passes 142 (docs/http2.md
// lists the three it fails, on purpose, with the reasons).
const h2specMinPassed = 141

// h2specMinPassedH2C is the bar on the clear listener: one below, for
// http2/3.5/2 (an invalid preface is read as HTTP/1.1 on a port serving
// both, and answered 400 before the close h2spec wants).
const h2specMinPassedH2C = h2specMinPassed - 1

// h2specBody is the upstream's answer (512 bytes).
var h2specBody = []byte(strings.Repeat("levee h2spec answer.\n", 25)[:512])

// h2specCaseTimeout is h2spec's -o, how long a case waits for the answer
// it expects. A case that must see the server close or reset waits this
// long when the server answers otherwise, so it costs the run's length
// only for failing cases; 3 s leaves a busy machine margin.
const h2specCaseTimeout = "3"

// TestH2specConformance runs h2spec (all 145 cases of its generic, hpack
// and http2 suites) against a levee process's TLS listener (ALPN h2) and
// against its clear listener (h2c with prior knowledge), each proxying to
// a real upstream, and wants at least h2specMinPassed passed over TLS
// (h2specMinPassedH2C over h2c). It prints the counts and names every
// failed and skipped case. It is a load test: h2spec judges each case
// against its per-case timeout.
func TestH2specConformance(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // bounded by levee's body limit
		// 512 bytes: h2spec skips its flow-control cases (6.9.x) when
		// the answer to GET / is shorter than 5 bytes.
		w.Write(h2specBody)
	}))
	t.Cleanup(up.Close)
	certFile, keyFile := selfSignedFiles(t)
	for _, tc := range []struct {
		name      string
		tls       bool
		minPassed int
	}{{"tls", true, h2specMinPassed}, {"h2c", false, h2specMinPassedH2C}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tlsLine := ""
			if tc.tls {
				tlsLine = fmt.Sprintf("tls: {cert_file: %s, key_file: %s}\n", certFile, keyFile)
			}
			cfg := fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
%supstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: data}
`, filepath.Join(dir, "state"), tlsLine, strings.TrimPrefix(up.URL, "http://"))
			path := filepath.Join(dir, "levee.yaml")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			lv := Start(t, levee, "levee", path)
			host, port, err := net.SplitHostPort(lv.Data)
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"-h", host, "-p", port, "-o", h2specCaseTimeout}
			if tc.tls {
				args = append(args, "-t", "-k")
			}
			// 145 cases; each waits at most -o, plus start-up.
			start := time.Now()
			rep := testsvc.RunH2spec(t, 3*time.Minute, args...)
			t.Logf("h2spec %s against levee (%s): %d cases, %d passed, %d failed, %d skipped, in %v",
				strings.Join(args, " "), tc.name, rep.Total, rep.Passed, len(rep.Failed), len(rep.Skipped), time.Since(start).Round(time.Millisecond))
			var failed []string
			for _, c := range rep.Failed {
				failed = append(failed, fmt.Sprintf("%s %s:\n    %s", c.ID(), c.Name, strings.ReplaceAll(strings.TrimSpace(c.Failure), "\n", " | ")))
			}
			for _, c := range rep.Skipped {
				t.Logf("skipped: %s %s", c.ID(), c.Name)
			}
			if len(failed) > 0 {
				t.Logf("failed cases:\n  %s", strings.Join(failed, "\n  "))
			}
			if rep.Total != 145 {
				t.Errorf("h2spec ran %d cases, want its 145", rep.Total)
			}
			if rep.Passed < tc.minPassed {
				t.Errorf("h2spec passed %d of %d, want at least %d; failed:\n  %s", rep.Passed, rep.Total, tc.minPassed, strings.Join(failed, "\n  "))
			}
		})
	}
}
