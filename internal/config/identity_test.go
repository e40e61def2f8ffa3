package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const jwtIssuer = "identity:\n  jwt_issuers:\n    corp:\n      issuer: https://idp.test\n      jwks_uri: https://idp.test/jwks\n      audiences: [api]\n"

// TestParseIdentity: defaults, and the refusals with their field paths.
func TestParseIdentity(t *testing.T) {
	cfg, err := Parse([]byte(head + jwtIssuer + upstreams + routes + "    auth: jwt\n"))
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.Identity.JWTIssuers["corp"]
	if j.ClockSkew != 30*time.Second || j.MaxTokenBytes != 8192 || j.AppClaim != "azp" || strings.Join(j.Algorithms, ",") != "RS256,ES256" {
		t.Fatalf("defaults: %+v", j)
	}
	for _, c := range []struct{ name, in, want string }{
		{"jwt without issuers", head + upstreams + routes + "    auth: jwt\n", "routes[0].auth: auth: jwt needs identity.jwt_issuers"},
		{"unknown issuer", head + jwtIssuer + upstreams + routes + "    auth: jwt\n    jwt: {issuers: [other]}\n", `routes[0].jwt.issuers: "other" is not in identity.jwt_issuers (corp)`},
		{"jwt block without auth jwt", head + jwtIssuer + upstreams + routes + "    jwt: {issuers: [corp]}\n", `routes[0].jwt: only allowed with auth: jwt, got auth "none"`},
		{"both sources", strings.Replace(head+jwtIssuer, "      audiences", "      discovery: https://idp.test\n      audiences", 1) + upstreams + routes, "identity.jwt_issuers.corp: exactly one of discovery and jwks_uri is required"},
		{"HS256", strings.Replace(head+jwtIssuer, "[api]\n", "[api]\n      algorithms: [HS256]\n", 1) + upstreams + routes, "identity.jwt_issuers.corp.algorithms[0]: must be one of"},
		{"none", strings.Replace(head+jwtIssuer, "[api]\n", "[api]\n      algorithms: [none]\n", 1) + upstreams + routes, "identity.jwt_issuers.corp.algorithms[0]: must be one of"},
		{"per_subject empty", strings.Replace(head+jwtIssuer, "[api]\n", "[api]\n      per_subject: {}\n", 1) + upstreams + routes, "identity.jwt_issuers.corp.per_subject: needs rate or quota"},
		{"per_subject burst alone", strings.Replace(head+jwtIssuer, "[api]\n", "[api]\n      per_subject: {burst: 3}\n", 1) + upstreams + routes, "identity.jwt_issuers.corp.per_subject.burst: needs rate"},
		{"min_refresh_interval under 1s", strings.Replace(head+jwtIssuer, "[api]\n", "[api]\n      min_refresh_interval: 100ms\n", 1) + upstreams + routes, "identity.jwt_issuers.corp.min_refresh_interval"},
		{"skew over 5m", strings.Replace(head+jwtIssuer, "[api]\n", "[api]\n      clock_skew: 6m\n", 1) + upstreams + routes, "identity.jwt_issuers.corp.clock_skew"},
		{"app and app_claim", strings.Replace(head+jwtIssuer, "[api]\n", "[api]\n      app: a\n      app_claim: azp\n", 1) + upstreams + routes, "identity.jwt_issuers.corp: app_claim and app exclude each other"},
		{"jwks_uri not http", strings.Replace(head+jwtIssuer, "https://idp.test/jwks", "file:///etc/passwd", 1) + upstreams + routes, "identity.jwt_issuers.corp.jwks_uri: must be an http:// or https:// URL"},
		{"no audiences", strings.Replace(head+jwtIssuer, "      audiences: [api]\n", "", 1) + upstreams + routes, "identity.jwt_issuers.corp.audiences"},
	} {
		_, err := Parse([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestParseForwardAuth: forward_auth's defaults, normal forms and
// refusals, each naming its field path and value.
func TestParseForwardAuth(t *testing.T) {
	cfg, err := Parse([]byte(head + upstreams + routes + "    auth: forward\n    forward_auth: {url: \"https://auth.test/check\", copy_response_headers: [x-user], cache_ttl: 5s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	fa := cfg.Routes[0].ForwardAuth
	if fa == nil || fa.URL != "https://auth.test/check" || fa.Timeout != DefaultForwardAuthTimeout || fa.OnError != ForwardAuthDeny ||
		fa.MaxInFlight != DefaultForwardAuthMaxInFlight || fa.CacheTTL != 5*time.Second ||
		!slices.Equal(fa.CopyRequestHeaders, []string{"Authorization", "Cookie"}) || !slices.Equal(fa.CopyResponseHeaders, []string{"X-User"}) {
		t.Fatalf("forward_auth = %+v", fa)
	}
	for _, c := range []struct{ name, yaml, want string }{
		{"forward without block", head + upstreams + routes + "    auth: forward\n", "routes[0].forward_auth: required with auth: forward"},
		{"block without forward", head + upstreams + routes + "    forward_auth: {url: \"http://a.test/\"}\n", `routes[0].forward_auth: only allowed with auth: forward, got auth "none"`},
		{"url scheme", head + upstreams + routes + "    auth: forward\n    forward_auth: {url: \"ftp://a.test/\"}\n", `routes[0].forward_auth.url: must be an http:// or https:// URL`},
		{"url userinfo", head + upstreams + routes + "    auth: forward\n    forward_auth: {url: \"http://u:p@a.test/\"}\n", `routes[0].forward_auth.url: must not carry user:password`},
		{"url missing", head + upstreams + routes + "    auth: forward\n    forward_auth: {timeout: 1s}\n", `routes[0].forward_auth.url: required`},
		{"timeout too long", head + upstreams + routes + "    auth: forward\n    forward_auth: {url: \"http://a.test/\", timeout: 1m}\n", `routes[0].forward_auth.timeout`},
		{"on_error", head + upstreams + routes + "    auth: forward\n    forward_auth: {url: \"http://a.test/\", on_error: maybe}\n", `routes[0].forward_auth.on_error: must be one of "deny", "allow", got "maybe"`},
		{"max_in_flight", head + upstreams + routes + "    auth: forward\n    forward_auth: {url: \"http://a.test/\", max_in_flight: 0}\n", `routes[0].forward_auth.max_in_flight`},
		{"hop-by-hop answer header", head + upstreams + routes + "    auth: forward\n    forward_auth: {url: \"http://a.test/\", copy_response_headers: [Transfer-Encoding]}\n", `routes[0].forward_auth.copy_response_headers[0]: must not be a hop-by-hop or framing header`},
		{"header name", head + upstreams + routes + "    auth: forward\n    forward_auth: {url: \"http://a.test/\", copy_request_headers: [\"a b\"]}\n", `routes[0].forward_auth.copy_request_headers[0]: must be a header field name`},
		{"bound app.id", head + upstreams + routes + "    auth: forward\n    forward_auth: {url: \"http://a.test/\"}\n    anonymous_limits: {rate: 1}\n", `routes[0].anonymous_limits: only allowed with auth: none`},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
