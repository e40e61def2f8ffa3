package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseUpstreamProtocol: protocol and http2 read with their defaults
// and values.
func TestParseUpstreamProtocol(t *testing.T) {
	const u = "upstreams:\n  video:\n    endpoints: [{address: 10.0.0.1:80}]\n"
	cfg, err := Parse([]byte(head + u + routes))
	if err != nil {
		t.Fatal(err)
	}
	v := cfg.Upstreams["video"]
	want := UpstreamHTTP2{MaxConnectionsPerEndpoint: 4, MaxConcurrentStreams: 100, ReadIdleTimeout: 30 * time.Second, PingTimeout: 15 * time.Second, MaxHeaderListSize: 1 << 20}
	if v.Protocol != "http1" || v.H2() != want {
		t.Errorf("defaults: %q %+v", v.Protocol, v.H2())
	}
	cfg, err = Parse([]byte(head + u + "    protocol: h2c\n    http2: {max_connections_per_endpoint: 2, max_concurrent_streams: 8, read_idle_timeout: 5s, ping_timeout: 2s, max_header_list_size: 64KiB}\n" + routes))
	if err != nil {
		t.Fatal(err)
	}
	v = cfg.Upstreams["video"]
	want = UpstreamHTTP2{MaxConnectionsPerEndpoint: 2, MaxConcurrentStreams: 8, ReadIdleTimeout: 5 * time.Second, PingTimeout: 2 * time.Second, MaxHeaderListSize: 64 << 10}
	if v.Protocol != "h2c" || v.H2() != want {
		t.Errorf("set: %q %+v", v.Protocol, v.H2())
	}
}

// TestParseRejectsUpstreamProtocol: every protocol and http2 error, exact.
func TestParseRejectsUpstreamProtocol(t *testing.T) {
	const u = "upstreams:\n  video:\n    endpoints: [{address: 10.0.0.1:80}]\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown", "    protocol: h3\n", []string{
			`upstreams.video.protocol: must be one of "http1", "http2", "h2c", "auto", got "h3"`}},
		{"http2 without tls", "    protocol: http2\n", []string{
			`upstreams.video.protocol: http2 requires a tls block (upstreams.video.tls); h2c is HTTP/2 over clear text`}},
		{"auto without tls", "    protocol: auto\n", []string{
			`upstreams.video.protocol: auto requires a tls block (upstreams.video.tls); h2c is HTTP/2 over clear text`}},
		{"h2c with tls", "    protocol: h2c\n    tls: {}\n", []string{
			`upstreams.video.protocol: h2c is HTTP/2 over clear text: it cannot go with a tls block (upstreams.video.tls); http2 is HTTP/2 over TLS`}},
		{"http2 block with http1", "    http2: {max_concurrent_streams: 10}\n", []string{
			`upstreams.video.http2: applies only with protocol http2, h2c or auto (upstreams.video.protocol is http1)`}},
		{"streams 0", "    protocol: h2c\n    http2: {max_concurrent_streams: 0}\n", []string{
			`upstreams.video.http2.max_concurrent_streams: must be a number from 1 to 1000, got 0`}},
		{"conns too many", "    protocol: h2c\n    http2: {max_connections_per_endpoint: 65}\n", []string{
			`upstreams.video.http2.max_connections_per_endpoint: must be a number from 1 to 64, got 65`}},
		{"header list small", "    protocol: h2c\n    http2: {max_header_list_size: 1KiB}\n", []string{
			`upstreams.video.http2.max_header_list_size: must be from 4KiB to 16MiB, got "1KiB"`}},
		{"ping 0", "    protocol: h2c\n    http2: {ping_timeout: 0s}\n", []string{
			`upstreams.video.http2.ping_timeout: must be greater than 0, got "0s"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(head + u + tt.yaml + routes))
			if err == nil || cfg != nil {
				t.Fatalf("Parse succeeded, want errors:\n%s", strings.Join(tt.want, "\n"))
			}
			if got := errorLines(t, err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
