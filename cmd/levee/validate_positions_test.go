package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidatePositions: `levee validate` places every problem it can in
// the file as "file:line:col: path: message", for each kind of problem:
// a YAML syntax error (the YAML library gives its line, not a column, so
// "file:line:"), a value of the wrong type, an unknown key (at the key),
// a bad value, a required key missing (at the mapping that lacks it), a
// second document; and standard input is named "standard input". A file
// that cannot be read has no position ("file: message").
func TestValidatePositions(t *testing.T) {
	const valid = "listen: 127.0.0.1:8080\nadmin: {listen: 127.0.0.1:9901}\nupstreams:\n  u: {endpoints: [{address: 127.0.0.1:9001}]}\nroutes:\n  - {name: r, match: {path_prefix: /}, upstream: u}\n"
	for _, c := range []struct {
		name, yaml string
		want       []string // the lines, file name left out
	}{
		{"syntax error", "listen: 127.0.0.1:8080\nadmin: {listen: 127.0.0.1:9901}\nupstreams: [\n", []string{
			":3: yaml: did not find expected node content",
		}},
		{"tab indentation", "listen: 127.0.0.1:8080\n\tadmin: {}\n", []string{
			":2: yaml: found a tab character that violates indentation",
		}},
		{"type error", strings.Replace(valid, "listen: 127.0.0.1:8080", "listen: [8080]", 1), []string{
			":1:9: listen: must be a string, got a sequence",
		}},
		{"unknown key", strings.Replace(valid, "upstream: u}", "upstream: u, timout: 1s}", 1), []string{
			":6:53: routes[0].timout: unknown field (did you mean \"timeout\"?)",
		}},
		{"bad value", strings.Replace(valid, "address: 127.0.0.1:9001", "address: nowhere", 1), []string{
			`:4:29: upstreams.u.endpoints[0].address: invalid address "nowhere": missing port in address`,
		}},
		{"required key missing", strings.Replace(valid, "admin: {listen: 127.0.0.1:9901}", "admin: {}", 1), []string{
			":2:8: admin.listen: required",
		}},
		{"second document", valid + "---\nlisten: 127.0.0.1:1\n", []string{
			":7:1: found a second YAML document; a config file holds exactly one",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, c.yaml)
			var out, errOut bytes.Buffer
			if code := run([]string{"validate", "-config", path}, &out, &errOut); code != 1 {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, errOut.String())
			}
			var want string
			for _, w := range c.want {
				want += path + w + "\n"
			}
			if errOut.String() != want {
				t.Errorf("stderr:\n%swant:\n%s", errOut.String(), want)
			}
			old := stdin
			stdin = strings.NewReader(c.yaml)
			defer func() { stdin = old }()
			errOut.Reset()
			if code := run([]string{"validate", "-config", "-"}, &out, &errOut); code != 1 || !strings.HasPrefix(errOut.String(), "standard input"+c.want[0]+"\n") {
				t.Errorf("from standard input: exit %d, stderr:\n%s", code, errOut.String())
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	var out, errOut bytes.Buffer
	if code := run([]string{"validate", "-config", missing}, &out, &errOut); code != 1 ||
		errOut.String() != missing+": reading config: open "+missing+": no such file or directory\n" {
		t.Errorf("a missing file: exit %d, stderr %q", code, errOut.String())
	}
}
