package config

import (
	"slices"
	"strings"
	"testing"
)

// stepRoute is a route on upstream video with the given extra lines (each
// indented four spaces).
func stepRoute(extra string) string {
	return head + upstreams + "routes:\n  - name: api\n    upstream: video\n" + extra
}

// directRoute is a route without upstream, with the given lines.
func directRoute(extra string) string {
	return head + upstreams + "routes:\n  - name: api\n" + extra
}

// rejectsSteps are TestParseRejects' cases of a route's headers,
// redirect, respond and cors.
var rejectsSteps = []rejectCase{
	{"header set of a framing field", stepRoute("    headers: {request: {set: {Content-Length: \"5\"}}}\n"), []string{
		`routes[0].headers.request.set.Content-Length: "Content-Length" cannot be changed: it frames, routes or identifies the request and is levee's to write`,
	}},
	{"header forbidden names", stepRoute("    headers:\n      request:\n        set: {host: a, x-forwarded-for: b, levee-app: c, proxy-x: d, x-request-id: e, te: f}\n        remove: [Transfer-Encoding, Connection]\n"), []string{
		`routes[0].headers.request.set.host: "Host" cannot be changed: it frames, routes or identifies the request and is levee's to write`,
		`routes[0].headers.request.set.x-forwarded-for: "X-Forwarded-For" cannot be changed: it frames, routes or identifies the request and is levee's to write`,
		`routes[0].headers.request.set.levee-app: "Levee-App" cannot be changed: it frames, routes or identifies the request and is levee's to write`,
		`routes[0].headers.request.set.proxy-x: "Proxy-X" cannot be changed: it frames, routes or identifies the request and is levee's to write`,
		`routes[0].headers.request.set.x-request-id: "X-Request-Id" cannot be changed: it frames, routes or identifies the request and is levee's to write`,
		`routes[0].headers.request.set.te: "Te" cannot be changed: it frames, routes or identifies the request and is levee's to write`,
		`routes[0].headers.request.remove[0]: "Transfer-Encoding" cannot be changed: it frames, routes or identifies the request and is levee's to write`,
		`routes[0].headers.request.remove[1]: "Connection" cannot be changed: it frames, routes or identifies the request and is levee's to write`,
	}},
	{"header credential set", stepRoute("    headers: {request: {set: {Authorization: \"Bearer x\"}}}\n"), []string{
		`routes[0].headers.request.set.Authorization: "Authorization" cannot be changed: it carries a credential, which the file may not hold (remove is allowed)`,
	}},
	{"header cors field on response", stepRoute("    headers: {response: {set: {Access-Control-Allow-Origin: \"*\"}}}\n"), []string{
		`routes[0].headers.response.set.Access-Control-Allow-Origin: "Access-Control-Allow-Origin" cannot be changed: it is written by the route's cors block`,
	}},
	{"header unknown variable", stepRoute("    headers: {request: {set: {X-Who: \"${user}\"}}}\n"), []string{
		`routes[0].headers.request.set.X-Who: uses unknown variable "${user}" (known: client_ip, request_id, route, app, host, tls_client_subject), got "${user}"`,
	}},
	{"header unclosed variable", stepRoute("    headers: {request: {add: {X-Who: \"a ${route\"}}}\n"), []string{
		`routes[0].headers.request.add.X-Who: has "${" without a closing "}", got "a ${route"`,
	}},
	{"header value with a newline", stepRoute("    headers: {response: {set: {X-A: \"a\\r\\nSet-Cookie: x\"}}}\n"), []string{
		`routes[0].headers.response.set.X-A: must hold only field-value characters (no CR, LF, NUL or other control), got "a\r\nSet-Cookie: x"`,
	}},
	{"header bad name", stepRoute("    headers: {request: {set: {\"x a\": b, x_y: c}}}\n"), []string{
		`routes[0].headers.request.set["x a"]: must be a header field name (a token without "_"), got "x a"`,
		`routes[0].headers.request.set.x_y: must be a header field name (a token without "_"), got "x_y"`,
	}},
	{"header set and removed", stepRoute("    headers: {request: {set: {X-A: b}, remove: [x-a]}}\n"), []string{
		`routes[0].headers.request.remove[0]: "X-A" is also in set: a field is set, added or removed, once`,
	}},
	{"header unknown key", stepRoute("    headers: {request: {replace: {X-A: b}}}\n"), []string{
		`routes[0].headers.request.replace: unknown field`,
	}},
	{"route with upstream and redirect", stepRoute("    redirect: {to: /x}\n"), []string{
		`routes[0]: a route has exactly one of upstream, split, data, redirect and respond, got upstream and redirect`,
	}},
	{"route with redirect and respond", directRoute("    redirect: {to: /x}\n    respond: {body: x}\n"), []string{
		`routes[0]: a route has exactly one of upstream, split, data, redirect and respond, got redirect and respond`,
	}},
	{"redirect status", directRoute("    redirect: {to: /x, status: 304}\n"), []string{
		`routes[0].redirect.status: must be one of 301, 302, 303, 307 or 308, got 304`,
	}},
	{"redirect without target", directRoute("    redirect: {status: 302}\n"), []string{
		`routes[0].redirect.to: required unless https is true`,
	}},
	{"redirect protocol-relative", directRoute("    redirect: {to: //evil.example/x}\n"), []string{
		`routes[0].redirect.to: must be an absolute URL or a path starting with a single "/", got "//evil.example/x"`,
	}},
	{"redirect host from a variable", directRoute("    redirect: {to: \"https://${host}/x\"}\n"), []string{
		`routes[0].redirect.to: must be an absolute http(s) URL with a fixed host (variables only after it), or a path starting with "/", got "https://${host}/x"`,
	}},
	{"redirect host extended by a variable", directRoute("    redirect: {to: \"https://example.com${host}\"}\n"), []string{
		`routes[0].redirect.to: must be an absolute http(s) URL with a fixed host (variables only after it), or a path starting with "/", got "https://example.com${host}"`,
	}},
	{"redirect http with https", directRoute("    redirect: {to: \"http://example.com/\", https: true}\n"), []string{
		`routes[0].redirect.to: is an http:// URL while https is true, got "http://example.com/"`,
	}},
	{"redirect unknown variable", directRoute("    redirect: {to: \"/x/${query}\"}\n"), []string{
		`routes[0].redirect.to: uses unknown variable "${query}" (known: ${path}, ${host}), got "/x/${query}"`,
	}},
	{"redirect other scheme", directRoute("    redirect: {to: \"javascript:alert(1)\"}\n"), []string{
		`routes[0].redirect.to: must be an absolute http(s) URL with a fixed host (variables only after it), or a path starting with "/", got "javascript:alert(1)"`,
	}},
	{"redirect with retry", directRoute("    retry: {attempts: 2}\n    redirect: {to: /x}\n"), []string{
		`routes[0].retry: a route that answers itself (redirect or respond) has no retry`,
	}},
	{"respond body too large", directRoute("    respond: {body: \"" + strings.Repeat("a", MaxRespondBody+1) + "\"}\n"), []string{
		`routes[0].respond.body: must be at most 64 KiB, got 65537 bytes`,
	}},
	{"respond 204 with a body", directRoute("    respond: {status: 204, body: x}\n"), []string{
		`routes[0].respond.body: must be empty with status 204`,
	}},
	{"respond status", directRoute("    respond: {status: 101}\n"), []string{
		`routes[0].respond.status: must be a number from 200 to 599, got 101`,
	}},
	{"respond content type", directRoute("    respond: {content_type: \"text\"}\n"), []string{
		`routes[0].respond.content_type: must be a media type such as "text/plain", got "text"`,
	}},
	{"cors star with credentials", stepRoute("    cors: {allow_origins: [\"*\"], allow_credentials: true}\n"), []string{
		`routes[0].cors.allow_credentials: must not be true with allow_origins "*": browsers refuse credentials with a wildcard origin; list the origins`,
	}},
	{"cors without origins", stepRoute("    cors: {max_age: 1m}\n"), []string{
		`routes[0].cors.allow_origins: required`,
	}},
	{"cors bad origins", stepRoute("    cors: {allow_origins: [\"https://a.example.com/path\", \"ftp://a.example.com\", \"https://a.*.example.com\", \"https://*.com\", \"https://A.example.com:443\", \"https://a.example.com\"]}\n"), []string{
		`routes[0].cors.allow_origins[0]: must be "*" or an origin such as "https://app.example.com" (scheme://host[:port], no path), got "https://a.example.com/path"`,
		`routes[0].cors.allow_origins[1]: must be "*" or an origin such as "https://app.example.com" (scheme://host[:port], no path), got "ftp://a.example.com"`,
		`routes[0].cors.allow_origins[2]: must have its wildcard as the whole first label, as "https://*.example.com", got "https://a.*.example.com"`,
		`routes[0].cors.allow_origins[3]: must have its wildcard as the whole first label of a domain of at least two labels, as "https://*.example.com", got "https://*.com"`,
		`routes[0].cors.allow_origins[5]: duplicate "https://a.example.com" (first at allow_origins[4])`,
	}},
	{"cors star beside origins", stepRoute("    cors: {allow_origins: [\"*\", \"https://a.example.com\"]}\n"), []string{
		`routes[0].cors.allow_origins: "*" allows every origin and stands alone`,
	}},
	{"cors max_age", stepRoute("    cors: {allow_origins: [\"*\"], max_age: 48h}\n"), []string{
		`routes[0].cors.max_age: must be from 1s to 24h0m0s, got "48h"`,
	}},
}

func TestNormalizeOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"*":                          "*",
		"https://App.Example.com":    "https://app.example.com",
		"https://a.example.com:443":  "https://a.example.com",
		"http://a.example.com:80":    "http://a.example.com",
		"http://a.example.com:8080":  "http://a.example.com:8080",
		"https://*.example.com:8443": "https://*.example.com:8443",
		"https://a.example.com/":     "https://a.example.com",
	} {
		if got, problem := NormalizeOrigin(in); got != want || problem != "" {
			t.Errorf("NormalizeOrigin(%q) = %q, %q; want %q", in, got, problem, want)
		}
	}
}

// FuzzHeaderTemplate: a value template either is refused or splits into
// parts that rebuild it, every variable one of HeaderVars.
func FuzzHeaderTemplate(f *testing.F) {
	for _, s := range []string{"", "a", "${route}", "x ${client_ip} y ${app}", "${", "${}", "$${route}}", "${nope}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts, problem := HeaderTemplate(s)
		if problem != "" {
			return
		}
		var b strings.Builder
		for i, p := range parts {
			if i%2 == 1 {
				if !slices.Contains(HeaderVars, p) {
					t.Fatalf("%q: variable %q", s, p)
				}
				b.WriteString("${" + p + "}")
			} else {
				b.WriteString(p)
			}
		}
		if b.String() != s {
			t.Fatalf("%q rebuilt as %q", s, b.String())
		}
	})
}
