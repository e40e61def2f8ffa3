package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestValidateRefusesTiedRoutes: two routes that tie on the route
// precedence and could take the same request are refused by validate,
// naming both (run refuses them through the same config.Load).
func TestValidateRefusesTiedRoutes(t *testing.T) {
	bad := writeFile(t, `
listen: 127.0.0.1:8080
admin: {listen: 127.0.0.1:9901}
upstreams:
  a: {endpoints: [{address: 127.0.0.1:9001}]}
routes:
  - {name: by-id, match: {host: api.test, path_template: "/v1/products/{id}", methods: [GET]}, upstream: a}
  - {name: by-int, match: {host: api.test, path_template: "/v1/products/{n:int}", methods: [GET]}, upstream: a}
  - {name: by-slug, match: {host: API.test, path_template: "/v1/products/{slug}", methods: [GET, PUT]}, upstream: a}
`)
	var out, errOut bytes.Buffer
	if code := run([]string{"validate", "-config", bad}, &out, &errOut); code != 1 {
		t.Fatalf("tied routes: exit %d, want 1; stderr %s", code, errOut.String())
	}
	want := `routes[2].match: duplicates routes[0] (same host, path_template and method "GET")`
	if got := strings.TrimSpace(errOut.String()); !strings.Contains(got, want) || strings.Count(got, "\n") != 0 {
		t.Errorf("stderr %q, want the one line %q", got, want)
	}
}
