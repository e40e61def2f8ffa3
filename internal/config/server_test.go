package config

// rejectsServer are TestParseRejects' cases of the data-plane listener, tls, admin, state_dir and server blocks.
var rejectsServer = []rejectCase{
	{"empty file", "", []string{
		"listen: required unless listeners is set",
		"admin.listen: required",
		"upstreams: required",
		"routes: required",
	}},
	{"only comments", "# nothing here\n", []string{
		"listen: required unless listeners is set",
		"admin.listen: required",
		"upstreams: required",
		"routes: required",
	}},
	{"duplicate top-level key", head + "listen: \":8081\"\n" + upstreams + routes, []string{
		"listen: duplicate key (first at line 1)",
	}},
	{"duration with words", head + "server:\n  idle_timeout: 5 seconds\n" + upstreams + routes, []string{
		`server.idle_timeout: must be a duration such as "1s", got "5 seconds"`,
	}},
	{"duration negative", head + "server:\n  shutdown_timeout: -1s\n" + upstreams + routes, []string{
		`server.shutdown_timeout: must be greater than 0, got "-1s"`,
	}},
	{"missing listen", "admin: {listen: \"127.0.0.1:9090\"}\n" + upstreams + routes, []string{
		"listen: required unless listeners is set",
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
	{"sequence where a mapping is expected", head + "server: [1, 2]\n" + upstreams + routes, []string{
		"server: must be a mapping, got a sequence",
	}},
	{"tls missing key_file", head + "tls:\n  cert_file: testdata/tls/cert.pem\n" + upstreams + routes, []string{
		"tls.key_file: required with tls.cert_file",
	}},
	{"tls cert file does not exist", head + "tls:\n  cert_file: testdata/tls/missing.pem\n  key_file: testdata/tls/key.pem\n" + upstreams + routes, []string{
		`tls.cert_file: file not found: "testdata/tls/missing.pem"`,
	}},
	{"tls key is a directory", head + "tls:\n  cert_file: testdata/tls/cert.pem\n  key_file: testdata/tls\n" + upstreams + routes, []string{
		`tls.key_file: not a regular file: "testdata/tls"`,
	}},
	{"tls empty", head + "tls: {}\n" + upstreams + routes, []string{
		"tls.cert_file: required unless tls.certificates or tls.acme is set",
		"tls.key_file: required unless tls.certificates or tls.acme is set",
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
	{"state_dir empty", head + "state_dir: \"\"\n" + upstreams + routes, []string{
		`state_dir: must not be empty (omit it for the default "./levee-state")`,
	}},
	{"custom tag", head + "state_dir: !env STATE\n" + upstreams + routes, []string{
		`state_dir: must be a string, got !env "STATE"`,
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
