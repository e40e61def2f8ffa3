package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseRejectsHealth: every new health field's errors, exact.
func TestParseRejectsHealth(t *testing.T) {
	const u = "upstreams:\n  video:\n    endpoints: [{address: 10.0.0.1:80}]\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"check without kind", "    health_check: {interval: 2s}\n", []string{
			"upstreams.video.health_check: needs exactly one of http (such as {path: /healthz}), grpc (such as {service: \"\"}) or tcp: true"}},
		{"check with both kinds", "    health_check: {http: {}, tcp: true}\n", []string{
			"upstreams.video.health_check.tcp: http and tcp: true exclude each other; set one"}},
		{"grpc check on http1", "    health_check: {grpc: {service: svc}}\n", []string{
			"upstreams.video.health_check.grpc: needs protocol h2c, http2 or auto: gRPC runs over HTTP/2 (upstreams.video.protocol is http1)"}},
		{"grpc and http", "    protocol: h2c\n    health_check: {http: {}, grpc: {}}\n", []string{
			"upstreams.video.health_check.grpc: http and grpc exclude each other; set one"}},
		{"grpc and tcp", "    protocol: h2c\n    health_check: {grpc: {}, tcp: true}\n", []string{
			"upstreams.video.health_check.tcp: grpc and tcp: true exclude each other; set one"}},
		{"grpc bad service", "    protocol: h2c\n    health_check: {grpc: {service: \"a b\"}}\n", []string{
			`upstreams.video.health_check.grpc.service: must hold only A-Z, a-z, 0-9, ".", "_", "/" and "-", got "a b"`}},
		{"grpc unknown field", "    protocol: h2c\n    health_check: {grpc: {servce: x}}\n", []string{
			`upstreams.video.health_check.grpc.servce: unknown field (did you mean "service"?)`}},
		{"tcp not a bool", "    health_check: {tcp: yes}\n", []string{
			`upstreams.video.health_check.tcp: must be true or false, got "yes"`}},
		{"timeout above interval", "    health_check: {tcp: true, interval: 1s, timeout: 2s}\n", []string{
			`upstreams.video.health_check.timeout: must be at most interval (1s), got "2s"`}},
		{"timeout above default interval", "    health_check: {tcp: true, timeout: 6s}\n", []string{
			`upstreams.video.health_check.timeout: must be at most interval (5s, the default), got "6s"`}},
		{"interval below default timeout", "    health_check: {tcp: true, interval: 500ms}\n", []string{
			`upstreams.video.health_check.interval: must be at least timeout (1s, the default), got "500ms"`}},
		{"bad interval", "    health_check: {tcp: true, interval: 0s}\n", []string{
			`upstreams.video.health_check.interval: must be greater than 0, got "0s"`}},
		{"runs out of range", "    health_check: {tcp: true, healthy_after: 0, unhealthy_after: 101}\n", []string{
			"upstreams.video.health_check.healthy_after: must be a number from 1 to 100, got 0",
			"upstreams.video.health_check.unhealthy_after: must be a number from 1 to 100, got 101"}},
		{"unknown check field", "    health_check: {tcp: true, intervall: 2s}\n", []string{
			`upstreams.video.health_check.intervall: unknown field (did you mean "interval"?)`}},
		{"bad path", "    health_check: {http: {path: healthz}}\n", []string{
			`upstreams.video.health_check.http.path: must start with "/", got "healthz"`}},
		{"path with space", "    health_check: {http: {path: \"/a b\"}}\n", []string{
			`upstreams.video.health_check.http.path: must not contain spaces or control characters, got "/a b"`}},
		{"bad expect", "    health_check: {http: {expect: [200, 200, 99, \"204\"]}}\n", []string{
			"upstreams.video.health_check.http.expect[1]: duplicate status 200",
			"upstreams.video.health_check.http.expect[2]: must be a number from 100 to 599, got 99",
			`upstreams.video.health_check.http.expect[3]: must be a number from 100 to 599, got "204"`}},
		{"empty expect", "    health_check: {http: {expect: []}}\n", []string{
			"upstreams.video.health_check.http.expect: must list 1 to 16 statuses, got 0"}},
		{"outlier runs", "    outlier_detection: {consecutive_gateway_failures: -1, consecutive_5xx: 1001}\n", []string{
			"upstreams.video.outlier_detection.consecutive_gateway_failures: must be a number from 0 to 1000, got -1",
			"upstreams.video.outlier_detection.consecutive_5xx: must be a number from 0 to 1000, got 1001"}},
		{"ejection percent", "    outlier_detection: {max_ejection_percent: 101}\n", []string{
			"upstreams.video.outlier_detection.max_ejection_percent: must be a number from 0 to 100, got 101"}},
		{"max below base", "    outlier_detection: {base_ejection_time: 10s, max_ejection_time: 5s}\n", []string{
			`upstreams.video.outlier_detection.max_ejection_time: must be at least base_ejection_time (10s), got "5s"`}},
		{"max below default base", "    outlier_detection: {max_ejection_time: 5s}\n", []string{
			`upstreams.video.outlier_detection.max_ejection_time: must be at least base_ejection_time (30s, the default), got "5s"`}},
		{"base above default max", "    outlier_detection: {base_ejection_time: 10m}\n", []string{
			`upstreams.video.outlier_detection.base_ejection_time: must be at most max_ejection_time (5m0s, the default), got "10m"`}},
		{"bad base", "    outlier_detection: {base_ejection_time: 30}\n", []string{
			`upstreams.video.outlier_detection.base_ejection_time: must be a duration such as "1s", got 30`}},
		{"panic threshold", "    panic_threshold: 150\n", []string{
			"upstreams.video.panic_threshold: must be a number from 0 to 100, got 150"}},
		{"panic threshold string", "    panic_threshold: \"50%\"\n", []string{
			`upstreams.video.panic_threshold: must be a number from 0 to 100, got "50%"`}},
		{"slow start zero", "    slow_start: 0s\n", []string{
			`upstreams.video.slow_start: must be greater than 0, got "0s"`}},
		{"zones without local", "    zones: {failover: [b]}\n", []string{
			"upstreams.video.zones.local: required, the zone this levee runs in"}},
		{"bad zone names", "    zones: {local: A, failover: [b, b, \"\", 7]}\n", []string{
			`upstreams.video.zones.local: zone must be 1 to 64 characters from a-z, 0-9, "_", "." and "-", got "A"`,
			`upstreams.video.zones.failover[1]: duplicate zone "b"`,
			`upstreams.video.zones.failover[2]: zone must be 1 to 64 characters from a-z, 0-9, "_", "." and "-", got ""`,
			"upstreams.video.zones.failover[3]: must be a string, got 7"}},
		{"failover names local", "    zones: {local: a, failover: [b, a]}\n", []string{
			`upstreams.video.zones.failover[1]: "a" is the local zone; list only other zones`}},
		{"overprovisioning", "    zones: {local: a, overprovisioning: 0.5}\n", []string{
			"upstreams.video.zones.overprovisioning: must be a number from 1 to 10, got 0.5"}},
		{"endpoint zone", "    endpoints: [{address: 10.0.0.2:80, zone: \"eu west\"}]\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := head + u + tt.yaml + routes
			want := tt.want
			if tt.name == "endpoint zone" {
				yaml = head + "upstreams:\n  video:\n" + tt.yaml + routes
				want = []string{`upstreams.video.endpoints[0].zone: zone must be 1 to 64 characters from a-z, 0-9, "_", "." and "-", got "eu west"`}
			}
			cfg, err := Parse([]byte(yaml))
			if err == nil || cfg != nil {
				t.Fatalf("Parse succeeded, want errors:\n%s", strings.Join(want, "\n"))
			}
			if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestHealthDefaults pins the defaults of each health block, from
// literals.
func TestHealthDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head + upstreams +
		"    health_check: {http: {}}\n    outlier_detection: {}\n    zones: {local: a}\n" +
		"  tcp:\n    endpoints: [{address: 10.0.0.1:80, zone: b}]\n    health_check: {tcp: true}\n    panic_threshold: 0\n    slow_start: 30s\n" +
		routes))
	if err != nil {
		t.Fatal(err)
	}
	v := cfg.Upstreams["video"]
	wantCheck := &HealthCheck{HTTP: &HTTPCheck{Path: "/healthz", Expect: []int{200}}, Interval: 5 * time.Second, Timeout: time.Second, HealthyAfter: 2, UnhealthyAfter: 3}
	if !reflect.DeepEqual(v.HealthCheck, wantCheck) {
		t.Errorf("health_check = %+v, want %+v", v.HealthCheck, wantCheck)
	}
	wantOutlier := &OutlierDetection{ConsecutiveGatewayFailures: 5, BaseEjectionTime: 30 * time.Second, MaxEjectionTime: 300 * time.Second, MaxEjectionPercent: 50}
	if !reflect.DeepEqual(v.OutlierDetection, wantOutlier) {
		t.Errorf("outlier_detection = %+v, want %+v", v.OutlierDetection, wantOutlier)
	}
	if want := (&Zones{Local: "a", Overprovisioning: 1.4}); !reflect.DeepEqual(v.Zones, want) {
		t.Errorf("zones = %+v, want %+v", v.Zones, want)
	}
	if v.PanicThreshold != 50 || v.SlowStart != 0 {
		t.Errorf("panic_threshold %v, slow_start %v; want 50, 0", v.PanicThreshold, v.SlowStart)
	}
	tcp := cfg.Upstreams["tcp"]
	if !tcp.HealthCheck.TCP || tcp.HealthCheck.HTTP != nil || tcp.PanicThreshold != 0 || tcp.SlowStart != 30*time.Second || tcp.Endpoints[0].Zone != "b" {
		t.Errorf("tcp upstream = %+v, check %+v", tcp, tcp.HealthCheck)
	}
	cfg, err = Parse([]byte(head + upstreams + "    health_check: {http: {path: /ping, expect: [204, 200]}, interval: 2s, timeout: 2s}\n" + routes))
	if err != nil {
		t.Fatal(err)
	}
	if hc := cfg.Upstreams["video"].HealthCheck; hc.HTTP.Path != "/ping" || !reflect.DeepEqual(hc.HTTP.Expect, []int{200, 204}) || hc.Timeout != 2*time.Second {
		t.Errorf("health_check = %+v, http %+v", hc, hc.HTTP)
	}
}
