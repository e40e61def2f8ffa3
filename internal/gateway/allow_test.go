package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMethodNotAllowedCarriesAllow sends raw requests over a real listener
// and checks that each 405 names, in Allow, the methods of every route
// matching the request's host and path (RFC 9110 section 15.5.6), on
// levee's own HTTP/1.1 loop and on a connection handed to net/http
// (Expect: 100-continue), and that a 404 or a served request has none.
func TestMethodNotAllowedCarriesAllow(t *testing.T) {
	ok, _ := backend(t, "ok")
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  ok:
    endpoints: [{address: %s}]
routes:
  - {name: read, match: {path_prefix: /items/, methods: [GET, HEAD]}, upstream: ok}
  - {name: write, match: {path_prefix: /items/, methods: [PUT]}, upstream: ok}
  - {name: deep, match: {path_prefix: /items/deep/, methods: [DELETE]}, upstream: ok}
  - {name: other-host, match: {host: other.test, path_prefix: /items/, methods: [PATCH]}, upstream: ok}
  - {name: open, match: {path_prefix: /open/}, upstream: ok}
`, hostPort(ok)))
	addr := strings.TrimPrefix(h.base, "http://")

	tests := []struct {
		name, head string
		status     int
		allow      string // "" = no Allow header
	}{
		{"one prefix, two routes", "POST /items/1 HTTP/1.1\r\nHost: levee.test\r\nContent-Length: 0\r\n\r\n", 405, "GET, HEAD, PUT"},
		{"the prefix chain", "PATCH /items/deep/1 HTTP/1.1\r\nHost: levee.test\r\n\r\n", 405, "DELETE, GET, HEAD, PUT"},
		{"the host's own routes", "GET /items/1 HTTP/1.1\r\nHost: other.test:8080\r\n\r\n", 405, "PATCH"},
		{"HTTP/1.0", "OPTIONS /items/1 HTTP/1.0\r\nHost: levee.test\r\n\r\n", 405, "GET, HEAD, PUT"},
		{"handed to net/http", "POST /items/1 HTTP/1.1\r\nHost: levee.test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", 405, "GET, HEAD, PUT"},
		{"served", "GET /items/1 HTTP/1.1\r\nHost: levee.test\r\n\r\n", 200, ""},
		{"404", "POST /nowhere HTTP/1.1\r\nHost: levee.test\r\nContent-Length: 0\r\n\r\n", 404, ""},
		{"method-less route", "POST /open/x HTTP/1.1\r\nHost: levee.test\r\nContent-Length: 0\r\n\r\n", 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(conn, tc.head); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status = %d, want %d (body %q)", resp.StatusCode, tc.status, body)
			}
			if got := resp.Header.Values("Allow"); strings.Join(got, "|") != tc.allow {
				t.Errorf("Allow = %q, want %q", got, tc.allow)
			}
			if tc.status == 405 && !strings.Contains(string(body), `"reason":"method_not_allowed"`) {
				t.Errorf("405 body = %q, want the method_not_allowed refusal", body)
			}
		})
	}
}
