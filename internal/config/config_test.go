package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Over 600 lines: the parser's table tests, one table per block of the
// file, share the helpers below; the golden and schema tests live apart.

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Fragments of a valid config, so that each bad case below shows only what
// it breaks.
const (
	head      = "listen: \":8080\"\nadmin: {listen: \"127.0.0.1:9090\"}\n"
	upstreams = "upstreams:\n  video:\n    endpoints:\n      - address: 10.0.0.1:80\n"
	routes    = "routes:\n  - name: api\n    upstream: video\n"
)

// errorLines returns the lines of an *Errors, failing the test if err is
// anything else.
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error is %T (%v), want *Errors", err, err)
	}
	if len(*errs) == 0 {
		t.Fatal("*Errors is empty")
	}
	lines := make([]string, len(*errs))
	for i, fe := range *errs {
		lines[i] = fe.Error()
	}
	if got := strings.Join(lines, "\n"); got != errs.Error() {
		t.Errorf("Errors.Error() = %q, want the lines joined: %q", errs.Error(), got)
	}
	return lines
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"empty file", "", []string{
			"listen: required",
			"admin.listen: required",
			"upstreams: required",
			"routes: required",
		}},
		{"only comments", "# nothing here\n", []string{
			"listen: required",
			"admin.listen: required",
			"upstreams: required",
			"routes: required",
		}},
		{"root is a sequence", "- listen: \":80\"\n", []string{
			"(file): must be a mapping, got a sequence",
		}},
		{"yaml syntax error", "listen: \":8080\"\nadmin: [\n", []string{
			"(file): yaml: line 2: did not find expected node content",
		}},
		{"two documents", head + upstreams + routes + "---\nlisten: \":1\"\n", []string{
			"(file): found a second YAML document at line 10; a config file holds exactly one",
		}},
		{"unknown top-level key", head + "extra: 1\n" + upstreams + routes, []string{
			"extra: unknown field",
		}},
		{"misspelt top-level key", "listn: \":8080\"\nadmin: {listen: \"127.0.0.1:9090\"}\n" + upstreams + routes, []string{
			`listn: unknown field (did you mean "listen"?)`,
			"listen: required",
		}},
		{"unknown nested key", head + upstreams + "    timeouts:\n      conect: 1s\n" + routes, []string{
			`upstreams.video.timeouts.conect: unknown field (did you mean "connect"?)`,
		}},
		{"duplicate key", head + upstreams + `routes:
  - name: api
    match:
      host: a.example.com
      host: b.example.com
    upstream: video
`, []string{
			"routes[0].match.host: duplicate key (first at line 10)",
		}},
		{"duplicate top-level key", head + "listen: \":8081\"\n" + upstreams + routes, []string{
			"listen: duplicate key (first at line 1)",
		}},
		{"weight abc", head + upstreams + "        weight: abc\n" + routes, []string{
			`upstreams.video.endpoints[0].weight: must be a number from 0 to 10000, got "abc"`,
		}},
		{"weight float", head + upstreams + "        weight: 2.5\n" + routes, []string{
			"upstreams.video.endpoints[0].weight: must be a number from 0 to 10000, got 2.5",
		}},
		{"weight negative", head + upstreams + "        weight: -1\n" + routes, []string{
			"upstreams.video.endpoints[0].weight: must be a number from 0 to 10000, got -1",
		}},
		{"weight too large", head + upstreams + "        weight: 10001\n" + routes, []string{
			"upstreams.video.endpoints[0].weight: must be a number from 0 to 10000, got 10001",
		}},
		{"weight quoted number", head + upstreams + "        weight: \"0\"\n" + routes, []string{
			`upstreams.video.endpoints[0].weight: must be a number from 0 to 10000, got "0"`,
		}},
		{"weight overflows int64", head + upstreams + "        weight: 99999999999999999999\n" + routes, []string{
			"upstreams.video.endpoints[0].weight: must be a number from 0 to 10000, got 99999999999999999999",
		}},
		{"weight is a sequence", head + upstreams + "        weight: [1]\n" + routes, []string{
			"upstreams.video.endpoints[0].weight: must be a number from 0 to 10000, got a sequence",
		}},
		{"duration with words", head + "server:\n  idle_timeout: 5 seconds\n" + upstreams + routes, []string{
			`server.idle_timeout: must be a duration such as "1s", got "5 seconds"`,
		}},
		{"duration bare integer", head + upstreams + "    timeouts:\n      connect: 5\n" + routes, []string{
			`upstreams.video.timeouts.connect: must be a duration such as "1s", got 5`,
		}},
		{"duration negative", head + "server:\n  shutdown_timeout: -1s\n" + upstreams + routes, []string{
			`server.shutdown_timeout: must be greater than 0, got "-1s"`,
		}},
		{"duration zero", head + upstreams + "    timeouts:\n      idle: 0s\n" + routes, []string{
			`upstreams.video.timeouts.idle: must be greater than 0, got "0s"`,
		}},
		{"endpoint without port", head + "upstreams:\n  video:\n    endpoints:\n      - address: 10.0.0.1\n" + routes, []string{
			`upstreams.video.endpoints[0].address: invalid address "10.0.0.1": missing port in address`,
		}},
		{"endpoint port 0", head + "upstreams:\n  video:\n    endpoints:\n      - address: 10.0.0.1:0\n" + routes, []string{
			`upstreams.video.endpoints[0].address: invalid address "10.0.0.1:0": port must be a number from 1 to 65535`,
		}},
		{"endpoint port 70000", head + "upstreams:\n  video:\n    endpoints:\n      - address: 10.0.0.1:70000\n" + routes, []string{
			`upstreams.video.endpoints[0].address: invalid address "10.0.0.1:70000": port must be a number from 1 to 65535`,
		}},
		{"endpoint named port", head + "upstreams:\n  video:\n    endpoints:\n      - address: example.com:http\n" + routes, []string{
			`upstreams.video.endpoints[0].address: invalid address "example.com:http": port must be a number from 1 to 65535`,
		}},
		{"endpoint empty host", head + "upstreams:\n  video:\n    endpoints:\n      - address: \":80\"\n" + routes, []string{
			`upstreams.video.endpoints[0].address: invalid address ":80": host is required`,
		}},
		{"endpoint bad host", head + "upstreams:\n  video:\n    endpoints:\n      - address: bad_host:80\n      - address: 10.0.0.256:80\n      - address: \"[example.com]:80\"\n" + routes, []string{
			`upstreams.video.endpoints[0].address: invalid address "bad_host:80": host must be an IP address or a DNS name`,
			`upstreams.video.endpoints[1].address: invalid address "10.0.0.256:80": host must be an IP address or a DNS name`,
			`upstreams.video.endpoints[2].address: invalid address "[example.com]:80": brackets must hold an IPv6 address`,
		}},
		{"endpoint address missing", head + "upstreams:\n  video:\n    endpoints:\n      - weight: 2\n" + routes, []string{
			"upstreams.video.endpoints[0].address: required",
		}},
		{"endpoint is a string", head + "upstreams:\n  video:\n    endpoints:\n      - 10.0.0.1:80\n" + routes, []string{
			`upstreams.video.endpoints[0]: must be a mapping such as {address: "10.0.0.1:8080", weight: 1}, got "10.0.0.1:80"`,
		}},
		{"duplicate endpoint", head + upstreams + "      - address: 10.0.0.1:80\n" + routes, []string{
			`upstreams.video.endpoints[1].address: duplicate endpoint "10.0.0.1:80" (first at endpoints[0])`,
		}},
		{"empty endpoints", head + "upstreams:\n  video:\n    endpoints: []\n" + routes, []string{
			"upstreams.video.endpoints: at least one endpoint is required",
		}},
		{"missing endpoints", head + "upstreams:\n  video:\n    balancer: weighted_round_robin\n" + routes, []string{
			"upstreams.video.endpoints: required unless discovery is set",
		}},
		{"unknown balancer", head + upstreams + "    balancer: random\n" + routes, []string{
			`upstreams.video.balancer: must be one of "weighted_round_robin", "least_request", "consistent_hash", got "random"`,
		}},
		{"max idle conns zero", head + upstreams + "    max_idle_conns_per_endpoint: 0\n" + routes, []string{
			"upstreams.video.max_idle_conns_per_endpoint: must be a number from 1 to 100000, got 0",
		}},
		{"bad upstream name", head + "upstreams:\n  Video:\n    endpoints: [{address: 10.0.0.1:80}]\n  my video:\n    endpoints: [{address: 10.0.0.1:80}]\n" + "routes:\n  - {name: api, upstream: Video}\n", []string{
			`upstreams.Video: name must be 1 to 64 characters from a-z, 0-9, "_", "." and "-", got "Video"`,
			`upstreams["my video"]: name must be 1 to 64 characters from a-z, 0-9, "_", "." and "-", got "my video"`,
		}},
		{"empty upstreams", head + "upstreams: {}\n" + routes, []string{
			"upstreams: at least one upstream is required",
		}},
		{"missing listen", "admin: {listen: \"127.0.0.1:9090\"}\n" + upstreams + routes, []string{
			"listen: required",
		}},
		{"listen is a number", "listen: 8080\nadmin: {listen: \"127.0.0.1:9090\"}\n" + upstreams + routes, []string{
			"listen: must be a string, got 8080",
		}},
		{"listen without port", "listen: \"0.0.0.0\"\nadmin: {listen: \"127.0.0.1:9090\"}\n" + upstreams + routes, []string{
			`listen: invalid address "0.0.0.0": missing port in address`,
		}},
		{"missing admin", "listen: \":8080\"\n" + upstreams + routes, []string{
			"admin.listen: required",
		}},
		{"admin listen equals listen", "listen: \":8080\"\nadmin: {listen: \"127.0.0.1:8080\"}\n" + upstreams + routes, []string{
			`admin.listen: must not bind the same port as listen (":8080"), got "127.0.0.1:8080"`,
		}},
		{"listener port out of range", "listen: \":65536\"\nadmin: {listen: \"127.0.0.1:x\"}\n" + upstreams + routes, []string{
			`listen: invalid address ":65536": port must be a number from 0 to 65535`,
			`admin.listen: invalid address "127.0.0.1:x": port must be a number from 0 to 65535`,
		}},
		{"admin listen overlaps listen", "listen: \":8080\"\nadmin: {listen: \"127.0.0.1:8080\"}\n" + upstreams + routes, []string{
			`admin.listen: must not bind the same port as listen (":8080"), got "127.0.0.1:8080"`,
		}},
		{"route naming a missing upstream", head + upstreams + "routes:\n  - name: api\n    upstream: vidoe\n", []string{
			`routes[0].upstream: unknown upstream "vidoe" (did you mean "video"?)`,
		}},
		{"duplicate route name", head + upstreams + routes + "  - name: api\n    match: {path_prefix: /v2}\n    upstream: video\n", []string{
			`routes[1].name: duplicate route name "api" (first at routes[0])`,
		}},
		{"bad route name", head + upstreams + "routes:\n  - name: API v1\n    upstream: video\n", []string{
			`routes[0].name: must be 1 to 64 characters from a-z, 0-9, "_", "." and "-", got "API v1"`,
		}},
		{"route name too long", head + upstreams + "routes:\n  - name: " + strings.Repeat("a", 65) + "\n    upstream: video\n", []string{
			`routes[0].name: must be 1 to 64 characters from a-z, 0-9, "_", "." and "-", got "` + strings.Repeat("a", 64) + `…"`,
		}},
		{"route missing name and upstream", head + upstreams + routes + "  - match: {path_prefix: /v2}\n", []string{
			"routes[1].name: required",
			"routes[1].upstream: required",
		}},
		{"null route", head + upstreams + routes + "  - ~\n", []string{
			"routes[1]: must be a mapping with name, match and upstream, got null",
		}},
		{"empty routes", head + upstreams + "routes: []\n", []string{
			"routes: at least one route is required",
		}},
		{"mapping where a sequence is expected", head + upstreams + "routes:\n  api:\n    upstream: video\n", []string{
			"routes: must be a sequence, got a mapping",
		}},
		{"sequence where a mapping is expected", head + "server: [1, 2]\n" + upstreams + routes, []string{
			"server: must be a mapping, got a sequence",
		}},
		{"path_prefix without slash", head + upstreams + "routes:\n  - name: api\n    match: {path_prefix: api}\n    upstream: video\n", []string{
			`routes[0].match.path_prefix: must start with "/", got "api"`,
		}},
		{"path_prefix with query", head + upstreams + "routes:\n  - name: api\n    match: {path_prefix: \"/api?x=1\"}\n    upstream: video\n", []string{
			`routes[0].match.path_prefix: must not contain "?" or "#", got "/api?x=1"`,
		}},
		{"bad method token", head + upstreams + "routes:\n  - name: api\n    match: {methods: [GET, \"GE T\", \"\"]}\n    upstream: video\n", []string{
			`routes[0].match.methods[1]: must be an HTTP method such as "GET", got "GE T"`,
			`routes[0].match.methods[2]: must be an HTTP method such as "GET", got ""`,
		}},
		{"duplicate method", head + upstreams + "routes:\n  - name: api\n    match:\n      methods: [get, POST, GET]\n    upstream: video\n", []string{
			`routes[0].match.methods[2]: duplicate method "GET" (first at methods[0])`,
		}},
		{"empty methods", head + upstreams + "routes:\n  - name: api\n    match: {methods: []}\n    upstream: video\n", []string{
			"routes[0].match.methods: must list at least one method; omit it to match any method",
		}},
		{"wildcard in the middle", head + upstreams + "routes:\n  - name: api\n    match: {host: a.*.com}\n    upstream: video\n", []string{
			`routes[0].match.host: wildcard must be the whole leftmost label, as in "*.example.com", got "a.*.com"`,
		}},
		{"bad hosts", head + upstreams + `routes:
  - {name: a, match: {host: "*"}, upstream: video}
  - {name: b, match: {host: "*.*.example.com"}, upstream: video}
  - {name: c, match: {host: "api.example.com:443"}, upstream: video}
  - {name: d, match: {host: "api..example.com"}, upstream: video}
  - {name: e, match: {host: "*a.example.com"}, upstream: video}
`, []string{
			`routes[0].match.host: wildcard must be the whole leftmost label, as in "*.example.com", got "*"`,
			`routes[1].match.host: wildcard must be the whole leftmost label, as in "*.example.com", got "*.*.example.com"`,
			`routes[2].match.host: must be a host name or IPv4 address without a port, got "api.example.com:443"`,
			`routes[3].match.host: must be a host name such as "api.example.com" or "*.example.com", got "api..example.com"`,
			`routes[4].match.host: wildcard must be the whole leftmost label, as in "*.example.com", got "*a.example.com"`,
		}},
		{"duplicate route match", head + upstreams + `routes:
  - {name: a, match: {host: x.example.com, path_prefix: /v1}, upstream: video}
  - {name: b, match: {host: y.example.com, path_prefix: /v1}, upstream: video}
  - {name: c, match: {host: X.example.com, path_prefix: /v1}, upstream: video}
  - {name: d, upstream: video}
  - {name: e, match: {path_prefix: /}, upstream: video}
`, []string{
			"routes[2].match: duplicates routes[0] (same host and path_prefix)",
			"routes[4].match: duplicates routes[3] (same host and path_prefix)",
		}},
		{"overlapping methods", head + upstreams + `routes:
  - {name: a, match: {path_prefix: /v1, methods: [GET, HEAD]}, upstream: video}
  - {name: b, match: {path_prefix: /v1, methods: [POST]}, upstream: video}
  - {name: c, match: {path_prefix: /v1, methods: [put, post, head]}, upstream: video}
`, []string{
			`routes[2].match: duplicates routes[0] (same host, path_prefix and method "HEAD")`,
		}},
		{"tls missing key_file", head + "tls:\n  cert_file: testdata/tls/cert.pem\n" + upstreams + routes, []string{
			"tls.key_file: required",
		}},
		{"tls cert file does not exist", head + "tls:\n  cert_file: testdata/tls/missing.pem\n  key_file: testdata/tls/key.pem\n" + upstreams + routes, []string{
			`tls.cert_file: file not found: "testdata/tls/missing.pem"`,
		}},
		{"tls key is a directory", head + "tls:\n  cert_file: testdata/tls/cert.pem\n  key_file: testdata/tls\n" + upstreams + routes, []string{
			`tls.key_file: not a regular file: "testdata/tls"`,
		}},
		{"tls empty", head + "tls: {}\n" + upstreams + routes, []string{
			"tls.cert_file: required",
			"tls.key_file: required",
		}},
		{"size with unknown unit", head + upstreams + "routes:\n  - name: api\n    upstream: video\n    max_body_bytes: 10 parsecs\n", []string{
			`routes[0].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "10 parsecs"`,
		}},
		{"size forms refused", head + upstreams + `routes:
  - {name: a, upstream: video, match: {path_prefix: /a}, max_body_bytes: -1}
  - {name: b, upstream: video, match: {path_prefix: /b}, max_body_bytes: "1.5MiB"}
  - {name: c, upstream: video, match: {path_prefix: /c}, max_body_bytes: "100"}
  - {name: d, upstream: video, match: {path_prefix: /d}, max_body_bytes: 1.5}
  - {name: e, upstream: video, match: {path_prefix: /e}, max_body_bytes: "9999999TiB"}
  - {name: f, upstream: video, match: {path_prefix: /f}, max_body_bytes: "10mib"}
`, []string{
			`routes[0].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got -1`,
			`routes[1].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "1.5MiB"`,
			`routes[2].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "100"`,
			`routes[3].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got 1.5`,
			`routes[4].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "9999999TiB"`,
			`routes[5].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "10mib"`,
		}},
		{"max_header_bytes out of range", head + "server:\n  max_header_bytes: 512B\n" + upstreams + routes, []string{
			`server.max_header_bytes: must be from 1KiB to 16MiB, got "512B"`,
		}},
		{"max_header_bytes too large", head + "server:\n  max_header_bytes: 16777217\n" + upstreams + routes, []string{
			"server.max_header_bytes: must be from 1KiB to 16MiB, got 16777217",
		}},
		{"max_connections negative", head + "server:\n  max_connections: -1\n" + upstreams + routes, []string{
			"server.max_connections: must be a number from 0 up, got -1",
		}},
		{"log level and access", head + "log:\n  level: verbose\n  access: yes\n" + upstreams + routes, []string{
			`log.level: must be one of "debug", "info", "warn", "error", got "verbose"`,
			`log.access: must be true, false or a mapping (output, sample_2xx, redact_query), got "yes"`,
		}},
		{"log access block", head + "log:\n  access:\n    outptu: stdout\n    output: /nonexistent-dir/a.log\n    sample_2xx: 1.5\n    redact_query: [token, \"\", Token, 3]\n" + upstreams + routes, []string{
			`log.access.outptu: unknown field (did you mean "output"?)`,
			`log.access.output: must be "stdout", "stderr" or a file in an existing directory; "/nonexistent-dir" is not a directory, got "/nonexistent-dir/a.log"`,
			"log.access.sample_2xx: must be a number from 0 to 1, got 1.5",
			`log.access.redact_query[1]: must be a query key of 1 to 128 bytes, got ""`,
			`log.access.redact_query[2]: duplicate key "Token"`,
			"log.access.redact_query[3]: must be a string, got 3",
		}},
		{"log access output a directory, redact_query not a list", head + "log:\n  access: {output: /, redact_query: token}\n" + upstreams + routes, []string{
			`log.access.output: must be "stdout", "stderr" or a file, not a directory, got "/"`,
			`log.access.redact_query: must be a sequence, got "token"`,
		}},
		{"metrics app_labels", head + "metrics:\n  app_labels: 1001\n  top: 3\n" + upstreams + routes, []string{
			"metrics.app_labels: must be a number from 0 to 1000, got 1001",
			"metrics.top: unknown field",
		}},
		{"metrics endpoint_labels", head + "metrics:\n  endpoint_labels: -1\n" + upstreams + routes, []string{
			"metrics.endpoint_labels: must be a number from 0 to 1000, got -1",
		}},
		{"state_dir empty", head + "state_dir: \"\"\n" + upstreams + routes, []string{
			`state_dir: must not be empty (omit it for the default "./levee-state")`,
		}},
		{"alias", head + `upstreams:
  video:
    endpoints: &eps
      - address: 10.0.0.1:80
  audio:
    endpoints: *eps
` + routes, []string{
			"upstreams.audio.endpoints: aliases are not allowed (*eps)",
		}},
		{"alias as a key and in a sequence", head + upstreams + "    timeouts: {&k connect: 1s, *k : 2s}\n" + "routes:\n  - &r {name: api, upstream: video}\n  - *r\n", []string{
			"upstreams.video.timeouts: aliases are not allowed (*k)",
			"routes[1]: aliases are not allowed (*r)",
		}},
		{"merge key", head + upstreams + "    timeouts:\n      <<: {connect: 1s}\n" + routes, []string{
			"upstreams.video.timeouts: merge keys (<<) are not allowed",
		}},
		{"custom tag", head + "state_dir: !env STATE\n" + upstreams + routes, []string{
			`state_dir: must be a string, got !env "STATE"`,
		}},
		{"complex key", head + "? [a, b]\n: 1\n" + upstreams + routes, []string{
			"(file): keys must be strings, got a sequence",
		}},
		{"retry unknown condition", head + upstreams + "    retry:\n      on: [connect_failure, 502, conect_failure, timeout]\n" + routes, []string{
			`upstreams.video.retry.on[2]: unknown condition "conect_failure" (did you mean "connect_failure"?)`,
			`upstreams.video.retry.on[3]: unknown condition "timeout"; must be one of "connect_failure", "refused_stream", "reset_before_response" or a status code from 400 to 599`,
		}},
		{"retry duplicate conditions", head + upstreams + "    retry:\n      on: [502, connect_failure, 503, 502, connect_failure]\n" + routes, []string{
			"upstreams.video.retry.on[3]: duplicate status 502 (first at on[0])",
			`upstreams.video.retry.on[4]: duplicate condition "connect_failure" (first at on[1])`,
		}},
		{"retry empty on", head + upstreams + "    retry: {on: []}\n" + routes, []string{
			"upstreams.video.retry.on: must list at least one condition; omit retry to disable retries",
		}},
		{"route retry empty on", head + upstreams + routes + "    retry: {on: []}\n", []string{
			"routes[0].retry.on: must list at least one condition; set attempts: 1 to disable retries on this route",
		}},
		{"retry status forms", head + upstreams + "    retry:\n      on: [\"502\", 302, 600, 503.0, true, [504], ~]\n" + routes, []string{
			`upstreams.video.retry.on[0]: status codes must be unquoted numbers, got "502"`,
			"upstreams.video.retry.on[1]: must be a status code from 400 to 599, got 302",
			"upstreams.video.retry.on[2]: must be a status code from 400 to 599, got 600",
			`upstreams.video.retry.on[3]: must be a condition such as "connect_failure" or a status code from 400 to 599, got 503.0`,
			`upstreams.video.retry.on[4]: must be a condition such as "connect_failure" or a status code from 400 to 599, got true`,
			`upstreams.video.retry.on[5]: must be a condition such as "connect_failure" or a status code from 400 to 599, got a sequence`,
			`upstreams.video.retry.on[6]: must be a condition such as "connect_failure" or a status code from 400 to 599, got null`,
		}},
		{"retry on is not a list", head + upstreams + "    retry: {on: connect_failure}\n" + routes, []string{
			`upstreams.video.retry.on: must be a sequence, got "connect_failure"`,
		}},
		{"retry attempts out of range", head + upstreams + "    retry: {attempts: 0}\n" + routes + "    retry: {attempts: 11}\n  - {name: b, match: {path_prefix: /b}, upstream: video, retry: {attempts: \"2\"}}\n", []string{
			"upstreams.video.retry.attempts: must be a number from 1 to 10, got 0",
			"routes[0].retry.attempts: must be a number from 1 to 10, got 11",
			`routes[1].retry.attempts: must be a number from 1 to 10, got "2"`,
		}},
		{"retry durations", head + upstreams + "    retry: {per_try_timeout: 0s, backoff: {base: 5, max: -1ms}}\n" + routes + "    timeout: 0s\n  - {name: b, match: {path_prefix: /b}, upstream: video, timeout: 30}\n", []string{
			`upstreams.video.retry.per_try_timeout: must be greater than 0, got "0s"`,
			`upstreams.video.retry.backoff.base: must be a duration such as "1s", got 5`,
			`upstreams.video.retry.backoff.max: must be greater than 0, got "-1ms"`,
			`routes[0].timeout: must be greater than 0, got "0s"`,
			`routes[1].timeout: must be a duration such as "1s", got 30`,
		}},
		{"retry backoff max below base", head + upstreams + "    retry: {backoff: {base: 1s, max: 500ms}}\n" + routes + "    retry: {backoff: {max: 10ms}}\n  - {name: b, match: {path_prefix: /b}, upstream: video, retry: {backoff: {base: 1s}}}\n", []string{
			`upstreams.video.retry.backoff.max: must be at least base (1s), got "500ms"`,
			`routes[0].retry.backoff.max: must be at least base (25ms, the default), got "10ms"`,
			`routes[1].retry.backoff.base: must be at most max (250ms, the default), got "1s"`,
		}},
		{"retry budget values", head + upstreams + `    retry:
      budget: {ratio: "0.2", min_per_second: .nan}
  audio:
    endpoints: [{address: 10.0.0.1:80}]
    retry:
      budget: {ratio: 1.5, min_per_second: -1}
  music:
    endpoints: [{address: 10.0.0.1:80}]
    retry:
      budget: {ratio: -.inf, min_per_second: .inf}
  talk:
    endpoints: [{address: 10.0.0.1:80}]
    retry:
      budget: {ratio: [0.2], min_per_second: 1000001, rate: 1}
` + routes, []string{
			`upstreams.video.retry.budget.ratio: must be a number from 0 to 1, got "0.2"`,
			"upstreams.video.retry.budget.min_per_second: must be a number from 0 to 1000000, got .nan",
			"upstreams.audio.retry.budget.ratio: must be a number from 0 to 1, got 1.5",
			"upstreams.audio.retry.budget.min_per_second: must be a number from 0 to 1000000, got -1",
			"upstreams.music.retry.budget.ratio: must be a number from 0 to 1, got -.inf",
			"upstreams.music.retry.budget.min_per_second: must be a number from 0 to 1000000, got .inf",
			"upstreams.talk.retry.budget.ratio: must be a number from 0 to 1, got a sequence",
			"upstreams.talk.retry.budget.min_per_second: must be a number from 0 to 1000000, got 1000001",
			`upstreams.talk.retry.budget.rate: unknown field (did you mean "ratio"?)`,
		}},
		{"route retry budget", head + upstreams + routes + "    retry:\n      budget: {ratio: 0.5}\n  - name: b\n    match: {path_prefix: /b}\n    upstream: Bad Name\n    retry: {budget: ~}\n", []string{
			"routes[0].retry.budget: budget is per upstream; set it under upstreams.video.retry",
			`routes[1].upstream: unknown upstream "Bad Name"`,
			"routes[1].retry.budget: budget is per upstream; set it under upstreams.NAME.retry",
		}},
		{"retry replay_body_limit", head + upstreams + "    retry: {replay_body_limit: 17MiB}\n" + routes + "    retry: {replay_body_limit: -1}\n", []string{
			`upstreams.video.retry.replay_body_limit: must be from 0B to 16MiB, got "17MiB"`,
			`routes[0].retry.replay_body_limit: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got -1`,
		}},
		{"retry unknown field and wrong shape", head + upstreams + "    retry: {attempt: 2, backoff: 25ms}\n" + routes + "    retry: true\n", []string{
			`upstreams.video.retry.attempt: unknown field (did you mean "attempts"?)`,
			`upstreams.video.retry.backoff: must be a mapping, got "25ms"`,
			"routes[0].retry: must be a mapping, got true",
		}},
		{"discovery without a source", head + "upstreams:\n  video:\n    discovery: {}\n  audio:\n    discovery:\n      push: false\n      max_drop_fraction: 0.5\n" + routes, []string{
			"upstreams.video.discovery: exactly one of file, etcd or push is required",
			"upstreams.audio.discovery: exactly one of file, etcd or push is required",
		}},
		{"discovery with two sources", head + "upstreams:\n  video:\n    discovery:\n      file: /etc/levee/video.json\n      push: true\n  audio:\n    discovery: {file: a.json, etcd: {endpoints: [\"127.0.0.1:2379\"], prefix: /a/}, push: yes}\n" + routes, []string{
			"upstreams.video.discovery: exactly one of file, etcd or push is required",
			"upstreams.audio.discovery: exactly one of file, etcd or push is required",
			`upstreams.audio.discovery.push: must be true or false, got "yes"`,
		}},
		{"neither endpoints nor discovery", head + "upstreams:\n  video:\n    discovery: ~\n  audio:\n    discovery: {push: true}\n    endpoints: []\n" + routes, []string{
			"upstreams.video.endpoints: required unless discovery is set",
			"upstreams.audio.endpoints: at least one endpoint is required; omit endpoints to start from discovery alone",
		}},
		{"discovery wrong shapes", head + "upstreams:\n  video:\n    discovery: /etc/levee/video.json\n  audio:\n    discovery: {file: \"\", confirm_after: 30, max_weight: 0, refresh: 1s}\n  music:\n    discovery: {file: [a.json], push: 1}\n" + routes, []string{
			`upstreams.video.discovery: must be a mapping, got "/etc/levee/video.json"`,
			"upstreams.audio.discovery.file: must not be empty",
			`upstreams.audio.discovery.confirm_after: must be a duration such as "1s", got 30`,
			"upstreams.audio.discovery.max_weight: must be a number from 1 to 1000000, got 0",
			"upstreams.audio.discovery.refresh: unknown field",
			"upstreams.music.discovery: exactly one of file, etcd or push is required",
			"upstreams.music.discovery.file: must be a string, got a sequence",
			"upstreams.music.discovery.push: must be true or false, got 1",
		}},
		{"discovery guard values", head + "upstreams:\n  video:\n    discovery: {push: true, max_drop_fraction: 0, confirm_after: 0s, max_weight: 1000001}\n  audio:\n    discovery: {push: true, max_drop_fraction: 1.5, max_weight: \"100\"}\n  music:\n    discovery: {push: true, max_drop_fraction: \"0.5\"}\n  talk:\n    discovery: {push: true, max_drop_fraction: .nan, max_weight: 2.5}\n" + routes, []string{
			"upstreams.video.discovery.max_drop_fraction: must be a number greater than 0 and at most 1, got 0",
			`upstreams.video.discovery.confirm_after: must be greater than 0, got "0s"`,
			"upstreams.video.discovery.max_weight: must be a number from 1 to 1000000, got 1000001",
			"upstreams.audio.discovery.max_drop_fraction: must be a number greater than 0 and at most 1, got 1.5",
			`upstreams.audio.discovery.max_weight: must be a number from 1 to 1000000, got "100"`,
			`upstreams.music.discovery.max_drop_fraction: must be a number greater than 0 and at most 1, got "0.5"`,
			"upstreams.talk.discovery.max_drop_fraction: must be a number greater than 0 and at most 1, got .nan",
			"upstreams.talk.discovery.max_weight: must be a number from 1 to 1000000, got 2.5",
		}},
		{"etcd missing fields", head + "upstreams:\n  video:\n    discovery:\n      etcd: {dial_timeout: 2}\n" + routes, []string{
			"upstreams.video.discovery.etcd.endpoints: required",
			"upstreams.video.discovery.etcd.prefix: required",
			`upstreams.video.discovery.etcd.dial_timeout: must be a duration such as "1s", got 2`,
		}},
		{"etcd bad endpoints", head + `upstreams:
  video:
    discovery:
      etcd:
        endpoints:
          - 127.0.0.1:2379
          - grpc://etcd:2379
          - http://etcd:2379/v3
          - 127.0.0.1
          - https://:2379
          - 127.0.0.1:2379
          - 2379
  audio:
    discovery: {etcd: {endpoints: [], prefix: /a/}}
  music:
    discovery: {etcd: {endpoints: "127.0.0.1:2379", prefix: /m/}}
` + routes, []string{
			"upstreams.video.discovery.etcd.prefix: required",
			`upstreams.video.discovery.etcd.endpoints[1]: invalid etcd endpoint "grpc://etcd:2379": scheme must be "http" or "https"`,
			`upstreams.video.discovery.etcd.endpoints[2]: invalid etcd endpoint "http://etcd:2379/v3": must be host:port or http(s)://host:port, with no path, query or user`,
			`upstreams.video.discovery.etcd.endpoints[3]: invalid etcd endpoint "127.0.0.1": missing port in address`,
			`upstreams.video.discovery.etcd.endpoints[4]: invalid etcd endpoint "https://:2379": host is required`,
			`upstreams.video.discovery.etcd.endpoints[5]: duplicate etcd endpoint "127.0.0.1:2379" (first at endpoints[0])`,
			"upstreams.video.discovery.etcd.endpoints[6]: must be a string, got 2379",
			"upstreams.audio.discovery.etcd.endpoints: must list 1 to 16 etcd endpoints, got 0",
			`upstreams.music.discovery.etcd.endpoints: must be a sequence, got "127.0.0.1:2379"`,
		}},
		{"etcd too many endpoints and bad prefix", head + "upstreams:\n  video:\n    discovery:\n      etcd:\n        endpoints: [" + strings.Repeat("\"127.0.0.1:2379\", ", 16) + "\"127.0.0.1:2379\"]\n        prefix: levee/video\n  audio:\n    discovery: {etcd: {endpoints: [\"etcd:2379\"], prefix: /levee/audio}}\n" + routes, []string{
			"upstreams.video.discovery.etcd.endpoints: must list 1 to 16 etcd endpoints, got 17",
			`upstreams.video.discovery.etcd.prefix: must start and end with "/", as in "/levee/services/video/", got "levee/video"`,
			`upstreams.audio.discovery.etcd.prefix: must start and end with "/", as in "/levee/services/video/", got "/levee/audio"`,
		}},
		{"unknown balancer with options", head + upstreams + "    balancer: least_requests\n    least_request: {ewma: true}\n" + routes, []string{
			`upstreams.video.balancer: must be one of "weighted_round_robin", "least_request", "consistent_hash", got "least_requests"`,
		}},
		{"balancer options with the wrong balancer", head + upstreams + "    least_request: {ewma: true}\n  audio:\n    balancer: least_request\n    consistent_hash: {hash_on: path}\n    endpoints: [{address: 10.0.0.1:80}]\n" + routes, []string{
			`upstreams.video.least_request: only allowed with balancer least_request; balancer is "weighted_round_robin" (the default)`,
			`upstreams.audio.consistent_hash: only allowed with balancer consistent_hash; balancer is "least_request"`,
		}},
		{"least_request values", head + upstreams + "    balancer: least_request\n    least_request: {ewma: \"true\", tau: 0s, alpha: 0.5}\n" + routes, []string{
			`upstreams.video.least_request.ewma: must be true or false, got "true"`,
			`upstreams.video.least_request.tau: must be greater than 0, got "0s"`,
			"upstreams.video.least_request.alpha: unknown field",
		}},
		{"consistent_hash missing", head + upstreams + "    balancer: consistent_hash\n  audio:\n    balancer: consistent_hash\n    consistent_hash: ~\n    endpoints: [{address: 10.0.0.1:80}]\n  music:\n    balancer: consistent_hash\n    consistent_hash: {}\n    endpoints: [{address: 10.0.0.1:80}]\n" + routes, []string{
			`upstreams.video.consistent_hash: required with balancer consistent_hash, as in {hash_on: "header:X-User"}`,
			`upstreams.audio.consistent_hash: required with balancer consistent_hash, as in {hash_on: "header:X-User"}`,
			"upstreams.music.consistent_hash.hash_on: required",
		}},
		{"bad hash_on", head + `upstreams:
  video:
    endpoints: [{address: 10.0.0.1:80}]
    balancer: consistent_hash
    consistent_hash: {hash_on: user}
  a:
    endpoints: [{address: 10.0.0.1:80}]
    balancer: consistent_hash
    consistent_hash: {hash_on: "header:"}
  b:
    endpoints: [{address: 10.0.0.1:80}]
    balancer: consistent_hash
    consistent_hash: {hash_on: "header:X User"}
  c:
    endpoints: [{address: 10.0.0.1:80}]
    balancer: consistent_hash
    consistent_hash: {hash_on: "cookie:a=b"}
  d:
    endpoints: [{address: 10.0.0.1:80}]
    balancer: consistent_hash
    consistent_hash: {hash_on: "client_ip:x"}
  e:
    endpoints: [{address: 10.0.0.1:80}]
    balancer: consistent_hash
    consistent_hash: {hash_on: "Header:X-User"}
  f:
    endpoints: [{address: 10.0.0.1:80}]
    balancer: consistent_hash
    consistent_hash: {hash_on: "query:` + strings.Repeat("q", 129) + `"}
  g:
    endpoints: [{address: 10.0.0.1:80}]
    balancer: consistent_hash
    consistent_hash: {hash_on: "query:a\tb"}
  h:
    endpoints: [{address: 10.0.0.1:80}]
    balancer: consistent_hash
    consistent_hash: {hash_on: 5, by: path}
` + routes, []string{
			`upstreams.video.consistent_hash.hash_on: must be "header:NAME", "cookie:NAME", "query:NAME", "client_ip" or "path", got "user"`,
			`upstreams.a.consistent_hash.hash_on: needs a name after "header:", got "header:"`,
			"upstreams.b.consistent_hash.hash_on: header name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~), got \"header:X User\"",
			"upstreams.c.consistent_hash.hash_on: cookie name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~), got \"cookie:a=b\"",
			`upstreams.d.consistent_hash.hash_on: "client_ip" takes no name, got "client_ip:x"`,
			`upstreams.e.consistent_hash.hash_on: must be "header:NAME", "cookie:NAME", "query:NAME", "client_ip" or "path", got "Header:X-User"`,
			`upstreams.f.consistent_hash.hash_on: query name must be at most 128 bytes, got "query:` + strings.Repeat("q", 58) + `…"`,
			`upstreams.g.consistent_hash.hash_on: query key must not contain control characters, got "query:a\tb"`,
			"upstreams.h.consistent_hash.hash_on: must be a string, got 5",
			"upstreams.h.consistent_hash.by: unknown field",
		}},
		{"limits max_concurrency not a number", head + upstreams + "    limits: {max_concurrency: lots}\n  a:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: 0}\n  b:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: 100001}\n  c:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: \"64\"}\n  d:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: Adaptive}\n  e:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: 2.5}\n" + routes, []string{
			`upstreams.video.limits.max_concurrency: must be a whole number from 1 to 100000 or "adaptive", got "lots"`,
			`upstreams.a.limits.max_concurrency: must be a whole number from 1 to 100000 or "adaptive", got 0`,
			`upstreams.b.limits.max_concurrency: must be a whole number from 1 to 100000 or "adaptive", got 100001`,
			`upstreams.c.limits.max_concurrency: must be a whole number from 1 to 100000 or "adaptive", got "64"`,
			`upstreams.d.limits.max_concurrency: must be a whole number from 1 to 100000 or "adaptive", got "Adaptive"`,
			`upstreams.e.limits.max_concurrency: must be a whole number from 1 to 100000 or "adaptive", got 2.5`,
		}},
		{"limits max_concurrency missing", head + upstreams + "    limits: {}\n  a:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_queue: 10, max_concurrency: ~}\n  b:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: 64\n" + routes, []string{
			`upstreams.video.limits.max_concurrency: required, a whole number from 1 to 100000 or "adaptive"`,
			`upstreams.a.limits.max_concurrency: required, a whole number from 1 to 100000 or "adaptive"`,
			"upstreams.b.limits: must be a mapping, got 64",
		}},
		{"limits min and max with a static limit", head + upstreams + "    limits:\n      max_concurrency: 64\n      min: 4\n      max: 512\n" + routes, []string{
			"upstreams.video.limits.min: only applies with max_concurrency: adaptive; max_concurrency is 64",
			"upstreams.video.limits.max: only applies with max_concurrency: adaptive; max_concurrency is 64",
		}},
		{"limits adaptive bounds out of range", head + upstreams + "    limits: {max_concurrency: adaptive, min: 0, max: 100001}\n  a:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: lots, min: -1, max: 10}\n" + routes, []string{
			"upstreams.video.limits.min: must be a number from 1 to 100000, got 0",
			"upstreams.video.limits.max: must be a number from 1 to 100000, got 100001",
			`upstreams.a.limits.max_concurrency: must be a whole number from 1 to 100000 or "adaptive", got "lots"`,
			"upstreams.a.limits.min: must be a number from 1 to 100000, got -1",
		}},
		{"limits adaptive min above max", head + upstreams + "    limits: {max_concurrency: adaptive, min: 64, max: 32}\n  a:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: adaptive, min: 2000}\n  b:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: adaptive, max: 2}\n" + routes, []string{
			"upstreams.video.limits.max: must be at least min (64), got 32",
			"upstreams.a.limits.min: must be at most max (1000, the default), got 2000",
			"upstreams.b.limits.max: must be at least min (4, the default), got 2",
		}},
		{"limits queue and consumer values", head + upstreams + "    limits: {max_concurrency: 8, max_queue: -1, queue_timeout: 0s, max_per_consumer: -2}\n  a:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: 8, max_queue: 1000001, queue_timeout: 50, max_per_consumer: \"1\", fair: true}\n" + routes, []string{
			"upstreams.video.limits.max_queue: must be a number from 0 to 1000000, got -1",
			`upstreams.video.limits.queue_timeout: must be greater than 0, got "0s"`,
			"upstreams.video.limits.max_per_consumer: must be a number from 0 up, got -2",
			"upstreams.a.limits.max_queue: must be a number from 0 to 1000000, got 1000001",
			`upstreams.a.limits.queue_timeout: must be a duration such as "1s", got 50`,
			`upstreams.a.limits.max_per_consumer: must be a number from 0 up, got "1"`,
			"upstreams.a.limits.fair: unknown field",
		}},
		{"route priority", head + upstreams + routes + "    priority: high\n  - {name: b, match: {path_prefix: /b}, upstream: video, priority: Critical}\n  - {name: c, match: {path_prefix: /c}, upstream: video, priority: 1}\n  - {name: d, match: {path_prefix: /d}, upstream: video, priorty: normal}\n", []string{
			`routes[0].priority: must be one of "critical", "normal", "sheddable", got "high"`,
			`routes[1].priority: must be one of "critical", "normal", "sheddable", got "Critical"`,
			"routes[2].priority: must be a string, got 1",
			`routes[3].priorty: unknown field (did you mean "priority"?)`,
		}},
		{"server connection caps", head + "server:\n  max_connections_per_ip: -1\n  http2_max_concurrent_streams: 0\n" + upstreams + routes + "server2: ~\n", []string{
			"server.max_connections_per_ip: must be a number from 0 up, got -1",
			"server.http2_max_concurrent_streams: must be a number from 1 to 10000, got 0",
			`server2: unknown field (did you mean "server"?)`,
		}},
		{"client timeouts out of bounds", head + "server: {body_timeout: 50ms, send_timeout: 2h}\n" + upstreams + routes + "    send_timeout: 0s\n  - {name: b, match: {path_prefix: /b}, upstream: video, send_timeout: 90m}\n", []string{
			`server.body_timeout: must be from 100ms to 1h0m0s, got "50ms"`,
			`server.send_timeout: must be from 100ms to 1h0m0s, got "2h"`,
			`routes[0].send_timeout: must be greater than 0, got "0s"`,
			`routes[1].send_timeout: must be from 100ms to 1h0m0s, got "90m"`,
		}},
		{"server http2 streams too many", head + "server: {http2_max_concurrent_streams: 10001, max_connections_per_ip: 1.5}\n" + upstreams + routes, []string{
			"server.http2_max_concurrent_streams: must be a number from 1 to 10000, got 10001",
			"server.max_connections_per_ip: must be a number from 0 up, got 1.5",
		}},
		{"server paths and raw_path", head + "server: {paths: {escaped_slashes: Decode, merge_slashes: true}}\n" + upstreams + routes + "    match: {raw_path: \"yes\"}\n  - {name: b, match: {path_prefix: /b, raw_path: 1}, upstream: video}\n", []string{
			`server.paths.escaped_slashes: must be one of "reject", "keep", "decode", got "Decode"`,
			"server.paths.merge_slashes: unknown field",
			`routes[0].match.raw_path: must be true or false, got "yes"`,
			"routes[1].match.raw_path: must be true or false, got 1",
		}},
		{"memory limit missing", head + "memory: {}\n" + upstreams + routes, []string{
			`memory.limit: required when memory is set, a size such as "2GiB"`,
		}},
		{"memory limit bounds", head + "memory: {limit: 32MiB}\n" + upstreams + routes, []string{
			"memory.limit: must be from 64MiB to 1TiB, got \"32MiB\"",
		}},
		{"memory limit forms", head + "memory:\n  limit: 2 gigabytes\n  soft_watermark: 0\n  hard_watermark: 1.5\n" + upstreams + routes, []string{
			`memory.limit: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "2 gigabytes"`,
			"memory.soft_watermark: must be a number greater than 0 and at most 1, got 0",
			"memory.hard_watermark: must be a number greater than 0 and at most 1, got 1.5",
		}},
		{"memory watermarks out of order", head + "memory: {limit: 2GiB, soft_watermark: 0.9, hard_watermark: 0.7}\n" + upstreams + routes, []string{
			"memory.soft_watermark: must be less than hard_watermark (0.7), got 0.9",
		}},
		{"memory watermark against a default", head + "memory: {limit: 2TiB, soft_watermark: 0.95}\n" + upstreams + routes + "memory2: {limit: 1GiB}\n", []string{
			"memory.limit: must be from 64MiB to 1TiB, got \"2TiB\"",
			"memory.soft_watermark: must be less than hard_watermark (0.9, the default), got 0.95",
			`memory2: unknown field (did you mean "memory"?)`,
		}},
		{"memory hard watermark below the default soft one", head + "memory: {limit: 1GiB, hard_watermark: 0.8, soft_watermark: ~}\n" + upstreams + routes, []string{
			"memory.hard_watermark: must be greater than soft_watermark (0.8, the default), got 0.8",
		}},
		{"memory is not a mapping", head + "memory: 2GiB\n" + upstreams + routes, []string{
			`memory: must be a mapping, got "2GiB"`,
		}},
		{"several errors in one file", `listen: ":8080"
admin:
  listen: "127.0.0.1:8080"
server:
  idle_timeout: 30
  max_header_bytes: 64 KiB
upstreams:
  video:
    endpoints:
      - address: 10.0.0.1
        weight: "3"
      - address: 10.0.0.2:80
    timeouts:
      conect: 1s
routes:
  - name: Video
    match:
      host: a.*.com
      path_prefix: video
      methods: [GET, get]
    upstream: vidoe
  - match: {}
    upstream: video
unknown: true
`, []string{
			`admin.listen: must not bind the same port as listen (":8080"), got "127.0.0.1:8080"`,
			`server.idle_timeout: must be a duration such as "1s", got 30`,
			`upstreams.video.endpoints[0].address: invalid address "10.0.0.1": missing port in address`,
			`upstreams.video.endpoints[0].weight: must be a number from 0 to 10000, got "3"`,
			`upstreams.video.timeouts.conect: unknown field (did you mean "connect"?)`,
			`routes[0].name: must be 1 to 64 characters from a-z, 0-9, "_", "." and "-", got "Video"`,
			`routes[0].match.host: wildcard must be the whole leftmost label, as in "*.example.com", got "a.*.com"`,
			`routes[0].match.path_prefix: must start with "/", got "video"`,
			`routes[0].match.methods[1]: duplicate method "GET" (first at methods[0])`,
			`routes[0].upstream: unknown upstream "vidoe" (did you mean "video"?)`,
			"routes[1].name: required",
			"unknown: unknown field",
		}},
	}
	// The table's own faults that would hide a case (its size is no test:
	// a count of cases cannot fail for a reason in Parse). A repeated name
	// runs as "name#01" and reads as one case in the output; a case with
	// no wanted error asserts only that Parse fails.
	names := map[string]bool{}
	for _, tt := range tests {
		if names[tt.name] {
			t.Errorf("case %q is in the table twice", tt.name)
		}
		names[tt.name] = true
		if len(tt.want) == 0 {
			t.Errorf("case %q wants no error message", tt.name)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			if cfg != nil {
				t.Errorf("Parse returned a Config as well as an error")
			}
			if err == nil {
				t.Fatalf("Parse succeeded, want errors:\n%s", strings.Join(tt.want, "\n"))
			}
			got := errorLines(t, err)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestParseValidGolden parses each testdata/valid/*.yaml, and ExampleYAML,
// and compares the normalised Config with the JSON file next to it. Run
// with -update to rewrite the golden files after an intended change.
func TestParseValidGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/valid/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs under testdata/valid: %v", err)
	}
	type input struct{ name, golden string }
	var cases []input
	for _, in := range inputs {
		cases = append(cases, input{in, strings.TrimSuffix(in, ".yaml") + ".json"})
	}
	cases = append(cases, input{"ExampleYAML", "testdata/example.json"})
	for _, c := range cases {
		t.Run(filepath.Base(c.name), func(t *testing.T) {
			var cfg *Config
			var err error
			if c.name == "ExampleYAML" {
				cfg, err = Parse([]byte(ExampleYAML))
			} else {
				cfg, err = Load(c.name)
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			checkInvariants(t, cfg)
			got, err := json.MarshalIndent(normalise(reflect.ValueOf(cfg)), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			if *update {
				if err := os.WriteFile(c.golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(c.golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the parsed config (run with -update if the change is intended):\n%s", c.golden, got)
			}
		})
	}
}

// normalise turns a Config into plain values for a readable golden file:
// durations as strings ("1m30s"), nil pointers and slices as null.
func normalise(v reflect.Value) any {
	if v.Type() == reflect.TypeFor[time.Duration]() {
		return time.Duration(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return normalise(v.Elem())
	case reflect.Struct:
		m := make(map[string]any, v.NumField())
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue // derived bookkeeping (Config.dataDefs), not configuration
			}
			m[v.Type().Field(i).Name] = normalise(v.Field(i))
		}
		return m
	case reflect.Map:
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			m[it.Key().String()] = normalise(it.Value())
		}
		return m
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		s := make([]any, v.Len())
		for i := range s {
			s[i] = normalise(v.Index(i))
		}
		return s
	}
	return v.Interface()
}

// TestDefaults pins every default: a minimal file must produce exactly
// this Config, built here from literals rather than the constants, so that
// a changed default is a visible change to this test.
func TestDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head + upstreams + routes))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Listen:   ":8080",
		Admin:    Admin{Listen: "127.0.0.1:9090", Token: "generate"},
		StateDir: "./levee-state",
		Server: Server{
			MaxHeaderBytes:    65536,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       60 * time.Second,
			ShutdownTimeout:   15 * time.Second,

			HTTP2MaxConcurrentStreams: 250,
			Paths:                     ServerPaths{EscapedSlashes: "reject"},
			UnderscoresInHeaders:      "drop",
			BodyTimeout:               30 * time.Second,
			SendTimeout:               60 * time.Second,
			AnswerBuffer:              1 << 20,
		},
		Log:     Log{Level: "info", Access: true, AccessLog: AccessLog{Output: "stderr", Sample2xx: 1}},
		Metrics: Metrics{AppLabels: 50, EndpointLabels: 50},
		Profiles: Profiles{Enabled: true, CPUThreshold: 0.9, Sustain: 10 * time.Second, OnShedding: true, Interval: 10 * time.Minute,
			Duration: 10 * time.Second, Keep: 10, MaxBytes: 64 << 20},
		Upstreams: map[string]*Upstream{"video": {
			Name:      "video",
			Balancer:  "weighted_round_robin",
			Endpoints: []Endpoint{{Address: "10.0.0.1:80", Weight: 1}},
			Timeouts: Timeouts{
				Connect:        time.Second,
				ResponseHeader: 10 * time.Second,
				Idle:           90 * time.Second,
			},
			MaxIdleConnsPerEndpoint: 256,
			PanicThreshold:          50,
		}},
		UpstreamOrder: []string{"video"},
		Routes: []Route{{Name: "api", Match: Match{PathPrefix: "/"}, Upstream: "video", Priority: "normal", Auth: "none",
			Upgrades: []string{"websocket"}}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got  %+v\nwant %+v", cfg, want)
	}
}

// TestRetryDefaults pins the defaults of a retry block, from literals: an
// upstream's empty block gets them all, a route's override gets them too
// (not the upstream's values) with a zero Budget, and no block means no
// retries.
func TestRetryDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head + upstreams + "    retry: {attempts: 7, per_try_timeout: 1s, budget: {ratio: 0.5}}\n" +
		"  audio:\n    endpoints: [{address: 10.0.0.1:80}]\n    retry: {}\n  plain:\n    endpoints: [{address: 10.0.0.1:80}]\n" +
		routes + "    retry: {on: [503]}\n" +
		"  - {name: b, match: {path_prefix: /b}, upstream: video}\n" +
		"  - {name: c, match: {path_prefix: /c}, upstream: plain, retry: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := func() *Retry {
		return &Retry{
			Attempts: 3,
			On: RetryOn{
				ConnectFailure: true, RefusedStream: true, ResetBeforeResponse: true,
				Statuses: []int{502, 503, 504},
			},
			Backoff:         Backoff{Base: 25 * time.Millisecond, Max: 250 * time.Millisecond},
			Budget:          RetryBudget{Ratio: 0.2, MinPerSecond: 5},
			ReplayBodyLimit: 65536,
		}
	}
	if got := cfg.Upstreams["audio"].Retry; !reflect.DeepEqual(got, defaults()) {
		t.Errorf("retry: {} = %+v, want %+v", got, defaults())
	}
	video := defaults()
	video.Attempts, video.PerTryTimeout, video.Budget.Ratio = 7, time.Second, 0.5
	if got := cfg.Upstreams["video"].Retry; !reflect.DeepEqual(got, video) {
		t.Errorf("video retry = %+v, want %+v", got, video)
	}
	if cfg.Upstreams["plain"].Retry != nil {
		t.Errorf("upstream without retry has %+v", cfg.Upstreams["plain"].Retry)
	}
	override := defaults()
	override.On = RetryOn{Statuses: []int{503}}
	override.Budget = RetryBudget{}
	if got := cfg.Routes[0].Retry; !reflect.DeepEqual(got, override) {
		t.Errorf("route override = %+v, want %+v (defaults, not the upstream's values)", got, override)
	}
	if cfg.Routes[1].Retry != nil || cfg.Routes[1].Timeout != 0 {
		t.Errorf("route without retry: Retry %+v, Timeout %v", cfg.Routes[1].Retry, cfg.Routes[1].Timeout)
	}
	if got, want := cfg.Upstreams["video"].RetryBudget(), (RetryBudget{Ratio: 0.5, MinPerSecond: 5}); got != want {
		t.Errorf("video RetryBudget() = %+v, want %+v", got, want)
	}
	if got, want := cfg.Upstreams["plain"].RetryBudget(), (RetryBudget{Ratio: 0.2, MinPerSecond: 5}); got != want {
		t.Errorf("plain RetryBudget() = %+v, want %+v", got, want)
	}
	// Each Retry owns its Statuses: changing one must not change another.
	cfg.Upstreams["audio"].Retry.On.Statuses[0] = 418
	if DefaultRetryOn().Statuses[0] != 502 || cfg.Routes[2].Retry.On.Statuses[0] != 502 {
		t.Error("default Statuses slice is shared")
	}
}

// TestAdmissionDefaults pins the defaults of the admission-control
// fields, from literals: a static limit's queue is twice the limit, an
// adaptive one gets min 4, max 1000 and a queue of 256, null blocks are
// absent, and the memory block's watermarks default to 0.8 and 0.9.
// TestExampleYAML checks that the documented example parses as documented:
// it is the config most operators will start from.
func TestExampleYAML(t *testing.T) {
	cfg, err := Parse([]byte(ExampleYAML))
	if err != nil {
		t.Fatalf("ExampleYAML does not parse:\n%v", err)
	}
	if cfg.TLS != nil || len(cfg.Upstreams) != 2 || len(cfg.Routes) != 3 {
		t.Errorf("ExampleYAML parsed to %d upstreams, %d routes, TLS %v", len(cfg.Upstreams), len(cfg.Routes), cfg.TLS)
	}
	if w := cfg.Upstreams["video"].Endpoints[2].Weight; w != 0 {
		t.Errorf("drained example endpoint has weight %d", w)
	}
	if cfg.Upstreams["video"].Retry == nil || cfg.Routes[1].Retry == nil || cfg.Routes[1].Timeout == 0 {
		t.Errorf("ExampleYAML no longer shows a retry block, a route override and a route timeout")
	}
	if cfg.Memory == nil || cfg.Upstreams["video"].Limits == nil || cfg.Upstreams["video"].Limits.Adaptive ||
		cfg.Upstreams["api"].Limits == nil || !cfg.Upstreams["api"].Limits.Adaptive || cfg.Routes[0].Priority != PrioritySheddable {
		t.Errorf("ExampleYAML no longer shows the memory block, a static and an adaptive limit and a route priority")
	}
	if api := cfg.Upstreams["api"]; api.Discovery == nil || api.Discovery.File == "" || api.LeastRequest == nil || len(api.Endpoints) == 0 {
		t.Errorf("ExampleYAML no longer shows a discovery source beside static endpoints and the least_request block: %+v", api)
	}
}

// TestEphemeralListeners pins that port 0 ("any free port") is accepted
// for both listeners and is not a conflict: the gateway's and the
// command's tests run levee on ephemeral loopback ports this way.
func TestEphemeralListeners(t *testing.T) {
	cfg, err := Parse([]byte("listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\n" + upstreams + routes))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:0" || cfg.Admin.Listen != "127.0.0.1:0" {
		t.Errorf("listen %q, admin.listen %q", cfg.Listen, cfg.Admin.Listen)
	}
}

// TestDrainedUpstream pins that an upstream whose endpoints all have
// weight 0 is valid: it is how an operator takes an upstream out of
// service (its routes are refused), and the gateway tests rely on it.
func TestDrainedUpstream(t *testing.T) {
	cfg, err := Parse([]byte(head + "upstreams:\n  video:\n    endpoints:\n      - {address: 10.0.0.1:80, weight: 0}\n      - {address: 10.0.0.2:80, weight: 0}\n" + routes))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range cfg.Upstreams["video"].Endpoints {
		if e.Weight != 0 {
			t.Errorf("endpoint %s has weight %d, want 0", e.Address, e.Weight)
		}
	}
}

func TestUpstreamOrderIsFileOrder(t *testing.T) {
	var b strings.Builder
	b.WriteString(head + "upstreams:\n")
	names := []string{"zeta", "alpha", "mid", "beta.2", "a-1"}
	for _, n := range names {
		b.WriteString("  " + n + ": {endpoints: [{address: \"10.0.0.1:80\"}]}\n")
	}
	b.WriteString("routes:\n  - {name: r, upstream: mid}\n")
	cfg, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.UpstreamOrder, names) {
		t.Errorf("UpstreamOrder = %v, want %v", cfg.UpstreamOrder, names)
	}
	for _, n := range names {
		if cfg.Upstreams[n] == nil || cfg.Upstreams[n].Name != n {
			t.Errorf("Upstreams[%q] = %+v, want Name %q", n, cfg.Upstreams[n], n)
		}
	}
}

func TestParseLimits(t *testing.T) {
	t.Run("file over 4MiB", func(t *testing.T) {
		data := []byte(head + upstreams + routes + "# " + strings.Repeat("x", 4<<20) + "\n")
		_, err := Parse(data)
		want := []string{"(file): file is larger than the 4MiB limit"}
		if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("nesting at the limit is walked", func(t *testing.T) {
		// Root mapping (1) + state_dir value nested 63 deep = 64 levels.
		data := head + "state_dir: " + strings.Repeat("[", 63) + strings.Repeat("]", 63) + "\n" + upstreams + routes
		_, err := Parse([]byte(data))
		want := []string{"state_dir: must be a string, got a sequence"}
		if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("nesting over 64 levels", func(t *testing.T) {
		data := head + "state_dir: " + strings.Repeat("[", 64) + strings.Repeat("]", 64) + "\n" + upstreams + routes
		_, err := Parse([]byte(data))
		want := []string{"state_dir" + strings.Repeat("[0]", 63) + ": nesting deeper than 64 levels is not allowed"}
		if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("billion laughs", func(t *testing.T) {
		data := head + upstreams + routes + `x: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
y: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
z: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
w: [*c,*c,*c,*c,*c,*c,*c,*c,*c]
`
		_, err := Parse([]byte(data))
		got := errorLines(t, err)
		// 4 unknown fields plus 27 aliases, and nothing expanded.
		if len(got) != 31 || got[0] != "x: unknown field" || got[2] != "y[0]: aliases are not allowed (*a)" {
			t.Errorf("got %d errors:\n%s", len(got), strings.Join(got, "\n"))
		}
	})
	t.Run("error count is capped", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(head + upstreams + routes)
		for i := range maxErrors + 5 {
			b.WriteString("unknown" + strconv.Itoa(i) + ": 1\n")
		}
		_, err := Parse([]byte(b.String()))
		got := errorLines(t, err)
		if len(got) != maxErrors+1 || got[maxErrors] != "(file): too many errors: 5 more not shown" {
			t.Errorf("got %d errors, last %q", len(got), got[len(got)-1])
		}
	})
}

func TestLoad(t *testing.T) {
	t.Run("valid", func(t *testing.T) {
		cfg, err := Load("testdata/valid/minimal.yaml")
		if err != nil || cfg.Listen != ":8080" {
			t.Fatalf("Load = %+v, %v", cfg, err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		cfg, err := Load("testdata/does-not-exist.yaml")
		want := []string{"(file): reading config: open testdata/does-not-exist.yaml: no such file or directory"}
		if got := errorLines(t, err); cfg != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("got %v %q, want nil %q", cfg, got, want)
		}
	})
	t.Run("file over 4MiB is not read whole", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "big.yaml")
		if err := os.WriteFile(path, bytes.Repeat([]byte("#\n"), 3<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		want := []string{"(file): file is larger than the 4MiB limit"}
		if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

func TestErrorFormat(t *testing.T) {
	errs := &Errors{
		{Path: "routes[0].upstream", Message: `unknown upstream "x"`},
		{Path: "", Message: "yaml: line 3: bad"},
	}
	want := "routes[0].upstream: unknown upstream \"x\"\n(file): yaml: line 3: bad"
	if got := errs.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var err error = errs
	var target *Errors
	if !errors.As(err, &target) || target != errs {
		t.Error("errors.As does not find *Errors")
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0B", 0, true},
		{"512B", 512, true},
		{"1KB", 1000, true},
		{"10MB", 10_000_000, true},
		{"2GB", 2_000_000_000, true},
		{"1TB", 1_000_000_000_000, true},
		{"64KiB", 65536, true},
		{"10MiB", 10 << 20, true},
		{"1GiB", 1 << 30, true},
		{"3TiB", 3 << 40, true},
		{"64 KiB", 65536, true},
		{"8388607TiB", 8388607 << 40, true},
		{"8388608TiB", 0, false}, // 2^63: overflows int64
		{"99999999999999999999B", 0, false},
		{"", 0, false},
		{"KiB", 0, false},
		{"64", 0, false},
		{"64kib", 0, false},
		{"64Kib", 0, false},
		{"-1KiB", 0, false},
		{"+1KiB", 0, false},
		{"1.5KiB", 0, false},
		{"64KiB ", 0, false},
		{" 64KiB", 0, false},
		{"10 parsecs", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseSize(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseSize(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCheckAddress(t *testing.T) {
	const endpoint, listener = false, true
	tests := []struct {
		in       string
		listener bool
		want     string
	}{
		{"10.0.0.1:80", endpoint, ""},
		{"[::1]:80", endpoint, ""},
		{"[fe80::1%eth0]:443", endpoint, ""},
		{"example.com:65535", endpoint, ""},
		{"example.com.:1", endpoint, ""},
		{"localhost:8080", endpoint, ""},
		{"a-b.c-d.example:80", endpoint, ""},
		{":8080", listener, ""},
		{"0.0.0.0:8080", listener, ""},
		{"127.0.0.1:0", listener, ""},
		{":0", listener, ""},
		{"[::]:443", listener, ""},
		{":8080", endpoint, "host is required"},
		{"10.0.0.1", endpoint, "missing port in address"},
		{"10.0.0.1", listener, "missing port in address"},
		{"::1:80", endpoint, "too many colons in address"},
		{"[::1]", endpoint, "missing port in address"},
		{"10.0.0.1:", endpoint, "port must be a number from 1 to 65535"},
		{"10.0.0.1:0", endpoint, "port must be a number from 1 to 65535"},
		{"10.0.0.1:65536", endpoint, "port must be a number from 1 to 65535"},
		{"10.0.0.1:65536", listener, "port must be a number from 0 to 65535"},
		{"10.0.0.1:+80", endpoint, "port must be a number from 1 to 65535"},
		{"10.0.0.1:-1", listener, "port must be a number from 0 to 65535"},
		{"10.0.0.1:123456", endpoint, "port must be a number from 1 to 65535"},
		{"[1.2.3.4]:80", endpoint, "brackets are only for IPv6 addresses"},
		{"-bad.example:80", endpoint, "host must be an IP address or a DNS name"},
		{"bad-.example:80", endpoint, "host must be an IP address or a DNS name"},
		{"a..b:80", endpoint, "host must be an IP address or a DNS name"},
		{"1.2.3:80", endpoint, "host must be an IP address or a DNS name"},
		{strings.Repeat("a", 64) + ".example:80", endpoint, "host must be an IP address or a DNS name"},
		{strings.Repeat("abcdefg.", 32) + "com:80", endpoint, "host must be an IP address or a DNS name"},
		{"exa mple.com:80", endpoint, "host must be an IP address or a DNS name"},
		{"bad_host:80", listener, "host must be an IP address or a DNS name"},
	}
	for _, tt := range tests {
		if got := checkAddress(tt.in, tt.listener); got != tt.want {
			t.Errorf("checkAddress(%q, listener=%v) = %q, want %q", tt.in, tt.listener, got, tt.want)
		}
	}
}

func TestSameBinding(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{":8080", ":8080", true},
		{":8080", "127.0.0.1:8080", true},
		{"0.0.0.0:8080", "10.0.0.1:8080", true},
		{"[::]:8080", "127.0.0.1:8080", true},
		{"LocalHost:8080", "localhost:8080", true},
		{":8080", ":8081", false},
		{"127.0.0.1:8080", "127.0.0.2:8080", false},
		{"127.0.0.1:080", "127.0.0.1:80", true},
		{"127.0.0.1:0", "127.0.0.1:0", false}, // each gets its own free port
		{":0", ":0", false},
	}
	for _, tt := range tests {
		if got := sameBinding(tt.a, tt.b); got != tt.want {
			t.Errorf("sameBinding(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestNormalizeMatchHost(t *testing.T) {
	tests := []struct{ in, want, problem string }{
		{"API.Example.com", "api.example.com", ""},
		{"*.Example.COM", "*.example.com", ""},
		{"*.com", "*.com", ""},
		{"192.0.2.1", "192.0.2.1", ""},
		{"", "", ""},
		{"*", "*", `wildcard must be the whole leftmost label, as in "*.example.com"`},
		{"*.192.0.2.1", "*.192.0.2.1", `must be a host name such as "api.example.com" or "*.example.com"`},
		{"example.com.", "example.com.", `must be a host name such as "api.example.com" or "*.example.com"`},
		{"[::1]", "[::1]", "must be a host name or IPv4 address without a port"},
	}
	for _, tt := range tests {
		got, problem := normalizeMatchHost(tt.in)
		if got != tt.want || problem != tt.problem {
			t.Errorf("normalizeMatchHost(%q) = %q, %q; want %q, %q", tt.in, got, problem, tt.want, tt.problem)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1: "1B", 1000: "1000B", 1024: "1KiB", 1536: "1536B", 16 << 20: "16MiB", 4 << 30: "4GiB", 1 << 40: "1TiB"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"conect", "connect", 1}, {"lsiten", "listen", 2}, {"abc", "", 3}, {"kitten", "sitting", 3}} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestDiscoveryDefaults pins the defaults of the discovery and balancer
// blocks, from literals: a source alone gets every guard default, an etcd
// source its dial timeout, least_request without a block its options, and
// static endpoints beside discovery are kept as the initial set.
func TestDiscoveryDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head + "upstreams:\n  video:\n    balancer: least_request\n    discovery: {file: video.json}\n" +
		"  audio:\n    discovery: {etcd: {endpoints: [\"127.0.0.1:2379\"], prefix: /a/}}\n" + "    endpoints: [{address: 10.0.0.1:80, weight: 0}]\n" +
		"  plain:\n    endpoints: [{address: 10.0.0.1:80}]\n" + routes))
	if err != nil {
		t.Fatal(err)
	}
	video := cfg.Upstreams["video"]
	if want := (&Discovery{File: "video.json", MaxDropFraction: 0.5, ConfirmAfter: 30 * time.Second, MaxWeight: 10000}); !reflect.DeepEqual(video.Discovery, want) {
		t.Errorf("video discovery = %+v, want %+v", video.Discovery, want)
	}
	if want := (&LeastRequest{EWMA: false, Tau: 10 * time.Second}); !reflect.DeepEqual(video.LeastRequest, want) {
		t.Errorf("least_request defaults = %+v, want %+v", video.LeastRequest, want)
	}
	if video.Endpoints != nil || video.ConsistentHash != nil || video.Discovery.Source() != "file" {
		t.Errorf("video: endpoints %v, consistent_hash %+v, source %q", video.Endpoints, video.ConsistentHash, video.Discovery.Source())
	}
	audio := cfg.Upstreams["audio"]
	want := &Discovery{
		Etcd:            &EtcdDiscovery{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/a/", DialTimeout: 2 * time.Second},
		MaxDropFraction: 0.5, ConfirmAfter: 30 * time.Second, MaxWeight: 10000,
	}
	if !reflect.DeepEqual(audio.Discovery, want) || audio.Discovery.Source() != "etcd" {
		t.Errorf("audio discovery = %+v, want %+v", audio.Discovery, want)
	}
	if !reflect.DeepEqual(audio.Endpoints, []Endpoint{{Address: "10.0.0.1:80", Weight: 0}}) || audio.LeastRequest != nil {
		t.Errorf("audio: endpoints %+v, least_request %+v", audio.Endpoints, audio.LeastRequest)
	}
	if p := cfg.Upstreams["plain"]; p.Discovery != nil || p.LeastRequest != nil || p.ConsistentHash != nil || p.Balancer != "weighted_round_robin" {
		t.Errorf("plain upstream = %+v", p)
	}
}

func TestNormalizeHashOn(t *testing.T) {
	tests := []struct{ in, want, problem string }{
		{"client_ip", "client_ip", ""},
		{"path", "path", ""},
		{"header:x-user", "header:X-User", ""},
		{"header:X-USER-ID", "header:X-User-Id", ""},
		{"header:x_user", "header:X_user", ""},
		{"cookie:SID", "cookie:SID", ""},
		{"query:user id", "query:user id", ""},
		{"query:" + strings.Repeat("q", 128), "query:" + strings.Repeat("q", 128), ""},
		{"query:é", "query:é", ""},
		{"", "", `must be "header:NAME", "cookie:NAME", "query:NAME", "client_ip" or "path"`},
		{"header", "header", `needs a name after "header:"`},
		{"query:", "query:", `needs a name after "query:"`},
		{"path:/x", "path:/x", `"path" takes no name`},
		{"header:a:b", "header:a:b", "header name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"},
		{"cookie:" + strings.Repeat("c", 129), "cookie:" + strings.Repeat("c", 129), "cookie name must be at most 128 bytes"},
		{"query:a\x7f", "query:a\x7f", "query key must not contain control characters"},
		{"CLIENT_IP", "CLIENT_IP", `must be "header:NAME", "cookie:NAME", "query:NAME", "client_ip" or "path"`},
	}
	for _, tt := range tests {
		got, problem := normalizeHashOn(tt.in)
		if got != tt.want || problem != tt.problem {
			t.Errorf("normalizeHashOn(%q) = %q, %q; want %q, %q", tt.in, got, problem, tt.want, tt.problem)
		}
	}
	for in, want := range map[string][2]string{"header:X-User": {"header", "X-User"}, "query:a:b": {"query", "a:b"}, "path": {"path", ""}} {
		if k, n := (ConsistentHash{HashOn: in}).Key(); k != want[0] || n != want[1] {
			t.Errorf("Key(%q) = %q, %q; want %q", in, k, n, want)
		}
	}
}

func TestCheckEtcdEndpoint(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1:2379", ""},
		{"http://127.0.0.1:2379", ""},
		{"https://etcd.internal:2379", ""},
		{"https://[::1]:2379", ""},
		{"HTTP://127.0.0.1:2379", `scheme must be "http" or "https"`},
		{"unix://etcd.sock", `scheme must be "http" or "https"`},
		{"http://127.0.0.1:2379/", "must be host:port or http(s)://host:port, with no path, query or user"},
		{"http://u@etcd:2379", "must be host:port or http(s)://host:port, with no path, query or user"},
		{"http://etcd", "missing port in address"},
		{"etcd:0", "port must be a number from 1 to 65535"},
		{"", "missing port in address"},
	}
	for _, tt := range tests {
		if got := checkEtcdEndpoint(tt.in); got != tt.want {
			t.Errorf("checkEtcdEndpoint(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAdmissionDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head + "memory: {limit: 64MiB}\n" + upstreams + "    limits: {max_concurrency: 64}\n" +
		"  audio:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: adaptive}\n" +
		"  plain:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: ~\n" +
		"  zero:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: 1, max_queue: 0, min: ~, max: ~}\n" +
		routes + "  - {name: b, match: {path_prefix: /b}, upstream: video, priority: sheddable}\n  - {name: c, match: {path_prefix: /c}, upstream: video, priority: ~}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (&Memory{Limit: 64 << 20, SoftWatermark: 0.8, HardWatermark: 0.9}); !reflect.DeepEqual(cfg.Memory, want) {
		t.Errorf("memory = %+v, want %+v", cfg.Memory, want)
	}
	for name, want := range map[string]*Limits{
		"video": {MaxConcurrency: 64, MaxQueue: 128, QueueTimeout: 50 * time.Millisecond},
		"audio": {Adaptive: true, Min: 4, Max: 1000, MaxQueue: 256, QueueTimeout: 50 * time.Millisecond},
		"plain": nil,
		"zero":  {MaxConcurrency: 1, MaxQueue: 0, QueueTimeout: 50 * time.Millisecond},
	} {
		if got := cfg.Upstreams[name].Limits; !reflect.DeepEqual(got, want) {
			t.Errorf("%s limits = %+v, want %+v", name, got, want)
		}
	}
	for i, want := range []string{"normal", "sheddable", "normal"} {
		if got := cfg.Routes[i].Priority; got != want {
			t.Errorf("routes[%d].Priority = %q, want %q", i, got, want)
		}
	}
	cfg, err = Parse([]byte(head + "memory: ~\n" + upstreams + routes))
	if err != nil || cfg.Memory != nil {
		t.Errorf("memory: ~ gave %+v, %v; want nil, nil", cfg.Memory, err)
	}
}
