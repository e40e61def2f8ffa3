package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateUpstreamTLSFiles: `levee validate` and `levee run` refuse the
// same broken upstream TLS files, each error naming the field and the file.
func TestValidateUpstreamTLSFiles(t *testing.T) {
	testdata, err := filepath.Abs(filepath.Join("..", "..", "internal", "config", "testdata", "upstream_tls"))
	if err != nil {
		t.Fatal(err)
	}
	conf := func(tls string) string {
		return writeFile(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  api: {endpoints: [{address: 127.0.0.1:9001}], tls: %s}
routes:
  - {name: api, upstream: api}
`, tls))
	}
	cases := []struct{ tls, want string }{
		{fmt.Sprintf("{ca_file: %s/missing.pem}", testdata), "upstreams.api.tls.ca_file: file not found: "},
		{fmt.Sprintf("{ca_file: %s/junk.pem}", testdata), "upstreams.api.tls.ca_file: no PEM certificate in "},
		{fmt.Sprintf("{cert_file: %[1]s/client.pem, key_file: %[1]s/ca.pem}", testdata), "upstreams.api.tls.key_file: "},
		{fmt.Sprintf("{cert_file: %s/client.pem}", testdata), "upstreams.api.tls.key_file: required with cert_file"},
	}
	for _, c := range cases {
		p := conf(c.tls)
		for _, cmd := range []string{"validate", "run"} {
			var out, errOut bytes.Buffer
			if code := run([]string{cmd, "-config", p}, &out, &errOut); code != 1 {
				t.Fatalf("%s with tls %s: exit %d, want 1 (stderr %s)", cmd, c.tls, code, errOut.String())
			}
			if !strings.Contains(errOut.String(), c.want) {
				t.Errorf("%s with tls %s: stderr %q, want %q", cmd, c.tls, errOut.String(), c.want)
			}
		}
	}
	var out, errOut bytes.Buffer
	good := conf(fmt.Sprintf("{ca_file: %[1]s/ca.pem, cert_file: %[1]s/client.pem, key_file: %[1]s/client.key, min_version: 1.3}", testdata))
	if code := run([]string{"validate", "-config", good}, &out, &errOut); code != 0 {
		t.Fatalf("valid upstream TLS: exit %d, stderr %s", code, errOut.String())
	}
}
