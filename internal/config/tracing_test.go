package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const tracingBase = "listen: 127.0.0.1:8080\nadmin: {listen: 127.0.0.1:9090}\n" +
	"upstreams: {web: {endpoints: [{address: 127.0.0.1:9000}]}}\nroutes: [{name: web, match: {path_prefix: /}, upstream: web}]\n"

// TestTracingBlock: off when omitted, defaults with an endpoint alone,
// every field read.
func TestTracingBlock(t *testing.T) {
	cfg, err := Parse([]byte(tracingBase))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tracing != nil {
		t.Errorf("Tracing = %+v without a tracing block, want nil (off)", cfg.Tracing)
	}
	cfg, err = Parse([]byte(tracingBase + "tracing: {endpoint: http://127.0.0.1:4318}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Tracing{Endpoint: "http://127.0.0.1:4318", Sampling: 0.01, ServiceName: "levee", Timeout: 10 * time.Second, MaxQueue: 2048}
	if !reflect.DeepEqual(cfg.Tracing, want) {
		t.Errorf("Tracing = %+v, want %+v", cfg.Tracing, want)
	}
	cfg, err = Parse([]byte(tracingBase + "tracing: {endpoint: https://otel.example/t, sampling: 0, service_name: edge, timeout: 2s, max_queue: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = &Tracing{Endpoint: "https://otel.example/t", Sampling: 0, ServiceName: "edge", Timeout: 2 * time.Second, MaxQueue: 10}
	if !reflect.DeepEqual(cfg.Tracing, want) {
		t.Errorf("Tracing = %+v, want %+v", cfg.Tracing, want)
	}
}

func TestTracingRejects(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tracing: {}", "tracing.endpoint: required"},
		{"tracing: {endpoint: 127.0.0.1:4318}", `tracing.endpoint: must be an http:// or https:// URL, got "127.0.0.1:4318"`},
		{"tracing: {endpoint: 'http://x/?a=1'}", `tracing.endpoint: must not carry user info, a query or a fragment, got "http://x/?a=1"`},
		{"tracing: {endpoint: 'http://'}", `tracing.endpoint: must name a host, got "http://"`},
		{"tracing: {endpoint: http://x, sampling: 1.5}", "tracing.sampling: must be a number from 0 to 1, got 1.5"},
		{"tracing: {endpoint: http://x, max_queue: 0}", "tracing.max_queue: must be a number from 1 to 1048576, got 0"},
		{"tracing: {endpoint: http://x, service_name: ''}", "tracing.service_name: must not be empty"},
		{"tracing: {endpoint: http://x, timeout: 0s}", `tracing.timeout: must be greater than 0, got "0s"`},
		{"tracing: {endpoint: http://x, sample: 1}", "tracing.sample: unknown field"},
	} {
		_, err := Parse([]byte(tracingBase + tc.yaml + "\n"))
		if err == nil {
			t.Errorf("%s: parsed, want %q", tc.yaml, tc.want)
			continue
		}
		got := errorLines(t, err)
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
			t.Errorf("%s: errors %q, want %q", tc.yaml, got, tc.want)
		}
	}
}
