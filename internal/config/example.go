package config

// ExampleYAML is a complete, commented, valid configuration that sets
// every field (most to its default) and explains it. The documentation
// embeds it and a test parses it, so it cannot drift from the parser.
const ExampleYAML = `# levee configuration. Every key is snake_case; unknown keys, duplicate
# keys, aliases (*name) and values of the wrong type are errors, and
# "levee validate -config FILE" lists every problem with its path.
# A key that is omitted or set to null (~) takes the default shown.

# Data-plane address, host:port. Required. An empty host (":8080") listens
# on all interfaces.
listen: ":8080"

# Serve HTTPS on listen. Both files must exist and be readable; relative
# paths are relative to the working directory. Omit for plain HTTP.
# tls:
#   cert_file: /etc/levee/tls/cert.pem
#   key_file: /etc/levee/tls/key.pem

# The admin listener (health, metrics, admin API), kept apart from the
# data plane. Required, and must not bind the same port as listen.
admin:
  listen: "127.0.0.1:9901"
  # A file holding the admin API's bearer token (one line, at least 16
  # characters), read at start and on reload. With it, every admin path
  # but /healthz and /readyz needs "Authorization: Bearer TOKEN". Required
  # (or tokens) when listen is not loopback (127.0.0.0/8, ::1, localhost;
  # an empty host is every interface). Its token may do everything (scope
  # write). Omit for none.
  # token_file: /etc/levee/admin-token
  # More tokens, each in its own file and with a scope (required): read
  # (GET and HEAD only: /metrics, pprof, the JSON views) or write
  # (everything). At most 64; no token in two files. Omit for none.
  # tokens:
  #   - {file: /etc/levee/metrics-token, scope: read}
  #   - {file: /etc/levee/deploy-token, scope: write}
  # Without token_file and tokens: generate (the default) writes a random
  # write token to state_dir/admin-token (mode 0600) on first start and
  # logs its path; reads stay open, writes need it. none: no token at
  # all (loopback only).
  # token: generate
  # Host names the admin API answers to besides IP addresses and
  # localhost (any other Host, such as a DNS-rebinding page's, is 421).
  # hosts: [levee-admin.internal]

# Where levee keeps state on disk, such as last-known-good snapshots.
state_dir: ./levee-state            # default

# Limits on client (downstream) connections.
server:
  # Largest request header block: bytes, or a size with a unit (B, KB, MB,
  # GB, TB are powers of 1000; KiB, MiB, GiB, TiB of 1024). 1KiB to 16MiB.
  max_header_bytes: 64KiB           # default
  # Durations are strings in Go syntax: "250ms", "10s", "1m30s". All > 0.
  read_header_timeout: 10s          # default: time to receive the headers
  idle_timeout: 60s                 # default: keep-alive idle time
  shutdown_timeout: 15s             # default: how long SIGTERM waits for in-flight requests
  max_connections: 0                # default: 0 = unlimited; above the cap a connection gets 503 connection_limit
  max_connections_per_ip: 0         # default: 0 = unlimited; the same cap per client IP address
  http2_max_concurrent_streams: 250 # default; 1 to 10000; concurrent requests on one HTTP/2 connection
  # Every request path is normalised before routing (see "Request paths").
  paths:
    escaped_slashes: reject         # default: %2F or %5C in a path is 400 bad_path; keep or decode
  # Request header names with "_": drop (removed before routing, auth and
  # forwarding), allow, or reject (400 bad_header_name).
  underscores_in_headers: drop      # default
  # Slow clients (NGINX's client_body_timeout and send_timeout), 100ms to
  # 1h, never off. body_timeout: the longest wait for the next bytes of a
  # request body (408 body_timeout; the upstream request is cancelled).
  # send_timeout: the longest wait for the client to take each write of an
  # answer, HTTP/2 flow control included (the connection or stream is
  # aborted); a route's own send_timeout replaces it.
  body_timeout: 30s                 # default
  send_timeout: 60s                 # default
  # The largest answer of known length read whole from the upstream before
  # it is written to the client (longer ones are read ahead by as much),
  # so that its admission slot is released once the upstream is done, not
  # the client (NGINX's proxy_buffering, in memory; 0 to 64MiB).
  answer_buffer: 1MiB               # default

# Memory guard (optional; omit for none). Sets the Go runtime's soft memory
# limit; above soft_watermark x limit of live heap plus the bodies levee
# has reserved room to buffer, sheddable requests get 503 memory_pressure,
# above hard_watermark x limit everything but critical does. See
# "Admission control" in docs/configuration.md and docs/admission.md.
memory:
  limit: 2GiB                       # required with the block; 64MiB to 1TiB
  soft_watermark: 0.8               # default; > 0 and < hard_watermark
  hard_watermark: 0.9               # default; <= 1

log:
  level: info                       # default; one of debug, info, warn, error
  # The access log, one JSON line per request: true (the default),
  # false, or a block of settings, which turns it on. Its fields: "Access
  # log" in docs/configuration.md. A reload can change it.
  access: true                      # default
  # access:
  #   output: stderr                # default; stdout, or a file appended to
  #                                 # (its directory must exist), reopened on SIGUSR1
  #   sample_2xx: 1                 # default; share of 2xx answers logged, 0 to 1;
  #                                 # every other status is always logged
  #   redact_query: [token, api_key] # query keys whose values are logged as REDACTED

metrics:
  # The busiest apps get their own app label in levee_app_requests_total,
  # up to this many (chosen at scrape time, then kept); the rest are summed
  # under app="other". 0 to 1000.
  app_labels: 50                    # default
  # Each upstream's first endpoints by address (when first seen, then kept)
  # get their own endpoint label in the levee_endpoint_* series, up to this
  # many; the rest are summed under endpoint="other". 0 to 1000.
  endpoint_labels: 50               # default

# CPU profiles and goroutine dumps levee captures by itself under
# <state_dir>/profiles, listed at GET /api/v1/profiles (docs/profiles.md).
profiles:
  enabled: true                     # default
  cpu_threshold: 0.9                # default; share of GOMAXPROCS's CPU that counts as busy
  sustain: 10s                      # default; busy this long, then a capture
  on_shedding: true                 # default; also when admission starts refusing
  interval: 10m                     # default; at most one capture per interval
  duration: 10s                     # default; how long the CPU profile records
  keep: 10                          # default; the newest captures kept
  max_bytes: 64MiB                  # default; the captures' files together

# OpenTelemetry tracing (optional; omit for none, at no cost): a span per
# request and per upstream attempt, W3C traceparent continued or started,
# exported over OTLP/HTTP to the collector at endpoint (<endpoint>/v1/traces
# when it has no path). A reload can change it. See docs/tracing.md.
# tracing:
#   endpoint: http://127.0.0.1:4318 # required
#   sampling: 0.01                  # default; share of requests without a sampled caller traced
#   service_name: levee             # default
#   timeout: 10s                    # default; one export request
#   max_queue: 2048                 # default; spans waiting for export, more are dropped

# Named groups of servers. Names: 1 to 64 of a-z, 0-9, "_", ".", "-".
upstreams:
  video:
    # How requests are spread over endpoints: weighted_round_robin (the
    # default; smooth, in proportion to weight), least_request or
    # consistent_hash. Every balancer skips endpoints with weight 0.
    balancer: weighted_round_robin  # default
    # balancer: consistent_hash     # the same key goes to the same endpoint
    # consistent_hash:              # required with consistent_hash, an error with any other balancer
    #   # header:NAME, cookie:NAME or query:NAME (NAME: 1 to 128 bytes;
    #   # header names are case-insensitive), client_ip, or path.
    #   hash_on: "header:X-User"
    endpoints:
      # host:port; the host is an IP address ([::1] for IPv6) or a DNS name.
      # weight: a whole number 0 to 10000, default 1; 0 drains the endpoint.
      # zone: the endpoint's failure domain (a-z, 0-9, "_", ".", "-"), default none.
      - address: "10.0.0.1:8080"
        weight: 3
        zone: a
      - address: "10.0.0.2:8080"
        zone: b
      - address: "video-3.internal:8080"
        weight: 0                   # drained: gets no new requests
    timeouts:
      connect: 1s                   # default
      response_header: 10s          # default: wait for response headers
      idle: 90s                     # default: idle pooled connection lifetime
    max_idle_conns_per_endpoint: 256  # default; 1 to 100000
    # Retries for this upstream's routes. Without a retry block (or with
    # retry: ~) nothing is retried; retry: {} turns retries on with the
    # defaults below. See "Retries" in docs/configuration.md for which
    # requests are retried.
    retry:
      attempts: 3                   # default; total tries, the first included; 1 to 10 (1 = no retries)
      # What is retried: connect_failure, refused_stream (HTTP/2 only, so
      # not yet used), reset_before_response, and status codes 400 to 599
      # written as numbers. A timeout levee itself hits counts as 504.
      on: [connect_failure, refused_stream, reset_before_response, 502, 503, 504]   # default
      per_try_timeout: 2s           # default none (omit): bounds each attempt; > 0
      backoff: {base: 25ms, max: 250ms}   # default; wait between attempts, max >= base
      # Over a 10s window, retries <= ratio x requests + min_per_second x 10.
      budget: {ratio: 0.2, min_per_second: 5}   # default; ratio 0 to 1, min_per_second 0 to 1000000
      replay_body_limit: 64KiB      # default; 0 to 16MiB; larger bodies are not retried
    # Admission control (optional; omit for no limit): at most
    # max_concurrency requests in flight to this upstream; the rest wait
    # in a bounded queue shared fairly between consumers (the
    # authenticated app, else the client IP). See "Admission control" in
    # docs/configuration.md.
    limits:
      max_concurrency: 64           # required: a whole number 1 to 100000, or adaptive (see api below)
      max_queue: 128                # default 2 x max_concurrency (256 with adaptive); 0 to 1000000; 0 = no queue
      queue_timeout: 50ms           # default; longest wait in the queue, then 503 queue_timeout; > 0
      max_per_consumer: 0           # default 0 = the limit plus half the queue; over it 429 consumer_limit
    # Health (each optional; see docs/health.md). Active checks probe
    # every endpoint, exactly one of http or tcp: true; at most 64 checks
    # run at once. Endpoints start healthy.
    health_check:
      http: {path: /healthz, expect: [200]}   # defaults; expect: 1 to 16 statuses
      # tcp: true                   # instead of http: a TCP connect
      interval: 5s                  # default; each wait is shortened by up to 10 % (jitter)
      timeout: 1s                   # default; at most interval
      healthy_after: 2              # default; passes in a row that return an endpoint (1 to 100)
      unhealthy_after: 3            # default; failures in a row that take it out (1 to 100)
    # Passive outlier detection: eject endpoints that fail live traffic.
    # Omit for none; outlier_detection: {} turns it on with the defaults.
    outlier_detection:
      consecutive_gateway_failures: 5   # default; connect errors, resets, timeouts, 502/503/504 in a row; 0 = off
      consecutive_5xx: 0            # default 0 = off; any 5xx (or gateway failure) in a row; 0 to 1000
      base_ejection_time: 30s       # default; the n-th ejection in a row lasts n x this
      max_ejection_time: 300s       # default; at least base_ejection_time
      max_ejection_percent: 50      # default; never more than this share of the endpoints ejected (rounded down)
    # Below this share (percent of the non-drained weight) of healthy
    # endpoints, balance over all non-drained endpoints. 0 = off.
    panic_threshold: 50             # default; 0 to 100
    slow_start: 30s                 # default none (omit); a joining or returning endpoint ramps from 10 % over this
    # Keep traffic in the local zone while it has enough healthy
    # capacity; spill to failover zones in order. Unlisted zones come last.
    zones:
      local: a                      # required with zones
      failover: [b]                 # default none; at most 16
      overprovisioning: 1.4         # default; 1 to 10
  api:
    balancer: least_request         # the less loaded of two random endpoints, weighted
    least_request:                  # only with least_request, an error with any other balancer
      ewma: false                   # default; true also weighs in a decayed latency estimate
      tau: 10s                      # default; decay time of that estimate; > 0
    # Take endpoints from a registry. Exactly one of file, etcd or push
    # (push: false counts as none). See "Discovery" in
    # docs/configuration.md for the instance format and what is refused.
    discovery:
      file: /etc/levee/api.json     # JSON array of instances, re-read when it changes; need not exist yet
      # etcd:                       # etcd v3; the value of each key under prefix is one instance
      #   endpoints: ["127.0.0.1:2379"]   # 1 to 16, host:port or http(s)://host:port
      #   prefix: /levee/services/api/    # required; starts and ends with "/"
      #   dial_timeout: 2s                # default; > 0
      # push: true                  # only from PUT /api/v1/upstreams/api/endpoints
      # Delta guard: an update that would drain or remove more than this
      # share of the active weight at once is held until it has persisted
      # for confirm_after, or POST /api/v1/upstreams/api/confirm.
      max_drop_fraction: 0.5        # default; > 0 and <= 1 (1 turns the guard off)
      confirm_after: 30s            # default; > 0
      max_weight: 10000             # default; 1 to 1000000: larger registry weights are rejected
    # With discovery, endpoints are optional. Given, they are served until
    # the source's first good update, and whenever the registry is
    # unreachable at start and state_dir holds no snapshot.
    endpoints:
      - address: "[fd00::10]:9000"
    # An adaptive limit is found from measured latency, kept from min to max.
    limits:
      max_concurrency: adaptive
      min: 4                        # default; 1 to max; only with adaptive
      max: 1000                     # default; min to 100000; only with adaptive

# Routing rules. Names: 1 to 64 of a-z, 0-9, "_", ".", "-", unique. Two
# routes may not have the same host and path_prefix with overlapping
# methods (or both without methods).
routes:
  - name: video-upload
    match:
      host: video.example.com       # exact host, no port; "*.example.com" for one leading wildcard label
      path_prefix: /upload          # must start with "/"; default "/"
      methods: [POST, PUT]          # HTTP method tokens; omit to match any method
    upstream: video                 # a key of upstreams
    max_body_bytes: 1GiB            # default 0 = no limit (bodies are streamed)
    # Who is refused first under pressure: sheddable, then normal, then
    # critical. A client's retry (Levee-Attempt above 1) counts as sheddable.
    priority: sheddable             # default normal; critical, normal or sheddable
    # Who may call: none (anyone; the default), api_key or hmac (only apps
    # whose grants name this route). See docs/apps.md.
    auth: none                      # default
    # Per client IP limit, only with auth: none. rate 0.000001 (one
    # request per 1e6 s) to 1000000000 requests per second; burst 1 to
    # 1000000000 and at most rate x 1e9 s, default max(1, ceil(rate)).
    # Omit for none.
    anonymous_limits: {rate: 10, burst: 20}
  - name: video
    match:
      host: video.example.com
    upstream: video
    # Deadline from the request's arrival to the response headers, across
    # every attempt; default none (omit). > 0.
    timeout: 30s
    # Longest wait for the client to take each write of an answer; default
    # server.send_timeout (a data route: data.send_timeout). 100ms to 1h.
    send_timeout: 60s
    # Replaces the upstream's whole retry block for this route: fields not
    # given take the defaults above, not the upstream's values. budget is
    # per upstream and not allowed here. Omit to use the upstream's block;
    # {attempts: 1} turns retries off for this route.
    retry: {attempts: 2, on: [connect_failure]}
    priority: normal                # default
    auth: api_key
    # Request trailers (after a chunked body) forwarded upstream; all others
    # are dropped. Default none. Fields that frame, route, authenticate or
    # identify a request (Host, Content-Length, Authorization, Levee-*,
    # X-Forwarded-*, ...) are errors.
    forward_trailers: [X-Checksum]
    # Protocols a client may switch to with Upgrade; others are removed from
    # the request. Default [websocket]; [] allows none; h2c is an error.
    upgrades: [websocket]
  - name: api
    match:
      host: "*.api.example.com"
      path_prefix: /v1/
      raw_path: false               # default; true forwards the path as received (a risk: see "Request paths")
    upstream: api
    max_body_bytes: 10MB
    priority: critical              # refused last; never for memory_pressure
    auth: hmac

# Consumer apps. They seed the app store under state_dir; apps created or
# changed through the admin API (/api/v1/apps, "levee apps") are kept
# across restarts and are not overwritten by this file: see the
# precedence rule in docs/apps.md. Ids: 1 to 64 of a-z, 0-9, "_", ".",
# "-", unique.
apps:
  - id: safety-platform
    name: Safety platform           # default: the id
    status: active                  # default; active or suspended (every key refused)
    # SHA-256 of each API key, 64 hex digits; never the key itself. At
    # most 16, each used by one app only. ("levee apps key-create" makes
    # keys in the store instead.)
    api_key_sha256: [9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08]
    grants: [video, api]            # route names this app may call
    limits:                         # every field optional; omitted = no such limit
      rate: 100                     # requests per second, sustained; 0.000001 to 1e9
      burst: 200                    # default max(1, ceil(rate)); only with rate; <= rate x 1e9 s
      quota: {requests: 1000000, per: 24h}  # both required; per from 1s to 8784h
      max_concurrency: 32           # requests in flight; 1 to 100000
    # Per route overrides of rate, burst and quota; each key is in grants.
    route_limits:
      video: {rate: 10, burst: 20}
`
