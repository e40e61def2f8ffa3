package config

import (
	"strings"
)

// rejectsUpstreams are TestParseRejects' cases of the upstreams block (endpoints, balancers, discovery, retry, limits, health).
var rejectsUpstreams = []rejectCase{
	{"unknown nested key", head + upstreams + "    timeouts:\n      conect: 1s\n" + routes, []string{
		`upstreams.video.timeouts.conect: unknown field (did you mean "connect"?)`,
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
	{"duration bare integer", head + upstreams + "    timeouts:\n      connect: 5\n" + routes, []string{
		`upstreams.video.timeouts.connect: must be a duration such as "1s", got 5`,
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
	{"retry unknown condition", head + upstreams + "    retry:\n      on: [connect_failure, 502, conect_failure, timeout]\n" + routes, []string{
		`upstreams.video.retry.on[2]: unknown condition "conect_failure" (did you mean "connect_failure"?)`,
		`upstreams.video.retry.on[3]: unknown condition "timeout"; must be one of "connect_failure", "refused_stream", "reset_before_response", a gRPC status name (cancelled, unknown, invalid_argument, deadline_exceeded, not_found, already_exists, permission_denied, resource_exhausted, failed_precondition, aborted, out_of_range, unimplemented, internal, unavailable, data_loss, unauthenticated) or a status code from 400 to 599`,
	}},
	{"retry gRPC status names", head + upstreams + "    retry:\n      on: [unavailable, unavalable, UNAVAILABLE, unavailable, ok]\n" + routes, []string{
		`upstreams.video.retry.on[1]: unknown condition "unavalable" (did you mean "unavailable"?)`,
		`upstreams.video.retry.on[2]: unknown condition "UNAVAILABLE" (did you mean "unavailable"? condition names are lower case)`,
		`upstreams.video.retry.on[3]: duplicate condition "unavailable" (first at on[0])`,
		`upstreams.video.retry.on[4]: unknown condition "ok"; must be one of "connect_failure", "refused_stream", "reset_before_response", a gRPC status name (cancelled, unknown, invalid_argument, deadline_exceeded, not_found, already_exists, permission_denied, resource_exhausted, failed_precondition, aborted, out_of_range, unimplemented, internal, unavailable, data_loss, unauthenticated) or a status code from 400 to 599`,
	}},
	{"retry duplicate conditions", head + upstreams + "    retry:\n      on: [502, connect_failure, 503, 502, connect_failure]\n" + routes, []string{
		"upstreams.video.retry.on[3]: duplicate status 502 (first at on[0])",
		`upstreams.video.retry.on[4]: duplicate condition "connect_failure" (first at on[1])`,
	}},
	{"retry empty on", head + upstreams + "    retry: {on: []}\n" + routes, []string{
		"upstreams.video.retry.on: must list at least one condition; omit retry to disable retries",
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
		"upstreams.video.discovery: exactly one of file, etcd, dns, dns_srv or push is required",
		"upstreams.audio.discovery: exactly one of file, etcd, dns, dns_srv or push is required",
	}},
	{"discovery with two sources", head + "upstreams:\n  video:\n    discovery:\n      file: /etc/levee/video.json\n      push: true\n  audio:\n    discovery: {file: a.json, etcd: {endpoints: [\"127.0.0.1:2379\"], prefix: /a/}, push: yes}\n" + routes, []string{
		"upstreams.video.discovery: exactly one of file, etcd, dns, dns_srv or push is required",
		"upstreams.audio.discovery: exactly one of file, etcd, dns, dns_srv or push is required",
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
		"upstreams.music.discovery: exactly one of file, etcd, dns, dns_srv or push is required",
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
}
