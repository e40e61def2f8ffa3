package config

import (
	"reflect"
	"testing"
)

func TestParseFramingFields(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"underscores unknown", head + "server: {underscores_in_headers: ignore}\n" + upstreams + routes, []string{
			`server.underscores_in_headers: must be one of "drop", "allow", "reject", got "ignore"`,
		}},
		{"trailer forbidden", head + upstreams + routes + "    forward_trailers: [x-checksum, host, Levee-App, x-forwarded-for, authorization, If-Match]\n", []string{
			`routes[0].forward_trailers[1]: "Host" frames, routes, authenticates or identifies a request and is never forwarded as a trailer (RFC 9110 section 6.5.1)`,
			`routes[0].forward_trailers[2]: "Levee-App" frames, routes, authenticates or identifies a request and is never forwarded as a trailer (RFC 9110 section 6.5.1)`,
			`routes[0].forward_trailers[3]: "X-Forwarded-For" frames, routes, authenticates or identifies a request and is never forwarded as a trailer (RFC 9110 section 6.5.1)`,
			`routes[0].forward_trailers[4]: "Authorization" frames, routes, authenticates or identifies a request and is never forwarded as a trailer (RFC 9110 section 6.5.1)`,
			`routes[0].forward_trailers[5]: "If-Match" frames, routes, authenticates or identifies a request and is never forwarded as a trailer (RFC 9110 section 6.5.1)`,
		}},
		{"trailer malformed and duplicate", head + upstreams + routes + "    forward_trailers: [\"a b\", X_Sum, x-sum, X-Sum]\n", []string{
			`routes[0].forward_trailers[0]: must be a header field name (a token without "_"), got "a b"`,
			`routes[0].forward_trailers[1]: must be a header field name (a token without "_"), got "X_Sum"`,
			`routes[0].forward_trailers[3]: duplicate trailer "X-Sum" (first at forward_trailers[2])`,
		}},
		{"upgrades h2c and duplicate", head + upstreams + routes + "    upgrades: [WebSocket, H2C, websocket, \"a/b\"]\n", []string{
			`routes[0].upgrades[1]: h2c is never forwarded: an upstream that switched would serve every later request on the connection past levee's routing, auth and limits; got "H2C"`,
			`routes[0].upgrades[2]: duplicate protocol "websocket" (first at upgrades[0])`,
			`routes[0].upgrades[3]: must be a protocol name such as "websocket", got "a/b"`,
		}},
		{"upgrades not a list", head + upstreams + routes + "    upgrades: websocket\n", []string{
			`routes[0].upgrades: must be a sequence, got "websocket"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("parsed")
			}
			if got := errorLines(t, err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}

	cfg, err := Parse([]byte(head + "server: {underscores_in_headers: reject}\n" + upstreams + routes +
		"    forward_trailers: [x-checksum, grpc-status-details]\n    upgrades: []\n" +
		"  - name: ws\n    match: {path_prefix: /ws}\n    upstream: video\n    upgrades: [WebSocket, foo]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.UnderscoresInHeaders != UnderscoresReject {
		t.Errorf("underscores_in_headers = %q", cfg.Server.UnderscoresInHeaders)
	}
	if got := cfg.Routes[0].ForwardTrailers; !reflect.DeepEqual(got, []string{"X-Checksum", "Grpc-Status-Details"}) {
		t.Errorf("forward_trailers = %q", got)
	}
	if got := cfg.Routes[0].Upgrades; got == nil || len(got) != 0 {
		t.Errorf("upgrades: [] = %#v, want an empty list", got)
	}
	if got := cfg.Routes[1].Upgrades; !reflect.DeepEqual(got, []string{"websocket", "foo"}) {
		t.Errorf("upgrades = %q", got)
	}
}

func TestForbiddenTrailer(t *testing.T) {
	for _, n := range []string{"host", "CONTENT-LENGTH", "transfer-encoding", "Trailer", "te", "connection", "upgrade",
		"authorization", "cookie", "x-api-key", "levee-app", "Levee-Attempt", "x-forwarded-for", "X-Forwarded-Host",
		"x-request-id", "forwarded", "date", "signature", "http2-settings"} {
		if !ForbiddenTrailer(n) {
			t.Errorf("%s allowed as a trailer", n)
		}
	}
	for _, n := range []string{"X-Checksum", "Grpc-Status", "Server-Timing", "Content-Md5x"} {
		if ForbiddenTrailer(n) {
			t.Errorf("%s forbidden", n)
		}
	}
}
