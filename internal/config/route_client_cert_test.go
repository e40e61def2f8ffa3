package config

import (
	"strings"
	"testing"
)

// TestRouteClientCert: auth: client_cert is accepted when every listener
// that serves routes asks for client certificates (a redirect_https
// listener serves none), and refused naming the route and the first
// listener without tls.client_auth otherwise.
func TestRouteClientCert(t *testing.T) {
	const mtls = "{cert_file: testdata/tls/cert.pem, key_file: testdata/tls/key.pem, client_auth: {ca_file: testdata/tls/cert.pem, mode: request}}"
	const plain = "{cert_file: testdata/tls/cert.pem, key_file: testdata/tls/key.pem}"
	route := routes + "    auth: client_cert\n"
	admin := "admin: {listen: \"127.0.0.1:9090\"}\n"
	for _, c := range []struct{ name, in, want string }{
		{"one listener with client_auth", "listen: \":8443\"\n" + admin + "tls: " + mtls + "\n" + upstreams + route, ""},
		{"listeners with client_auth and a redirect", admin + "listeners:\n  - {name: web, listen: \":8443\", tls: " + mtls + "}\n  - {name: redirect, listen: \":8080\", redirect_https: {}}\n" + upstreams + route, ""},
		{"clear text", head + upstreams + route, `routes[0].auth: auth: client_cert (route "api") needs tls.client_auth on every listener that serves routes: listener "default" has no tls.client_auth`},
		{"tls without client_auth", "listen: \":8443\"\n" + admin + "tls: " + plain + "\n" + upstreams + route, `listener "default" has no tls.client_auth`},
		{"a second listener without", admin + "listeners:\n  - {name: web, listen: \":8443\", tls: " + mtls + "}\n  - {name: inside, listen: \":8080\"}\n" + upstreams + route,
			`routes[0].auth: auth: client_cert (route "api") needs tls.client_auth on every listener that serves routes: listener "inside" has no listeners[1].tls.client_auth`},
	} {
		_, err := Parse([]byte(c.in))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
