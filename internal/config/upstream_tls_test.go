package config

import (
	"crypto/tls"
	"reflect"
	"strings"
	"testing"
)

// TestParseRejectsUpstreamTLS: every upstreams.*.tls error, exact: the
// field's path and the value or file at fault.
func TestParseRejectsUpstreamTLS(t *testing.T) {
	const u = "upstreams:\n  video:\n    endpoints: [{address: 10.0.0.1:80}]\n"
	const dir = "testdata/upstream_tls/"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"missing ca_file", "    tls: {ca_file: " + dir + "nope.pem}\n", []string{
			`upstreams.video.tls.ca_file: file not found: "testdata/upstream_tls/nope.pem"`}},
		{"ca_file not PEM", "    tls: {ca_file: " + dir + "junk.pem}\n", []string{
			`upstreams.video.tls.ca_file: no PEM certificate in "testdata/upstream_tls/junk.pem"`}},
		{"empty ca_file", "    tls: {ca_file: \"\"}\n", []string{
			`upstreams.video.tls.ca_file: must not be empty`}},
		{"cert without key", "    tls: {cert_file: " + dir + "client.pem}\n", []string{
			`upstreams.video.tls.key_file: required with cert_file`}},
		{"key without cert", "    tls: {key_file: " + dir + "client.key}\n", []string{
			`upstreams.video.tls.cert_file: required with key_file`}},
		{"cert not PEM", "    tls: {cert_file: " + dir + "junk.pem, key_file: " + dir + "client.key}\n", []string{
			`upstreams.video.tls.cert_file: no PEM certificate in "testdata/upstream_tls/junk.pem"`}},
		{"key not a key", "    tls: {cert_file: " + dir + "client.pem, key_file: " + dir + "ca.pem}\n", []string{
			`upstreams.video.tls.key_file: "testdata/upstream_tls/ca.pem" is not the private key of cert_file: found a certificate rather than a key in the PEM for the private key`}},
		{"missing key", "    tls: {cert_file: " + dir + "client.pem, key_file: " + dir + "nope.key}\n", []string{
			`upstreams.video.tls.key_file: file not found: "testdata/upstream_tls/nope.key"`}},
		{"bad server_name", "    tls: {server_name: \"api example\"}\n", []string{
			`upstreams.video.tls.server_name: must be a DNS name or an IP address, got "api example"`}},
		{"min_version 1.1", "    tls: {min_version: 1.1}\n", []string{
			`upstreams.video.tls.min_version: must be 1.2 or 1.3, got 1.1`}},
		{"min_version string", "    tls: {min_version: \"TLS1.3\"}\n", []string{
			`upstreams.video.tls.min_version: must be 1.2 or 1.3, got "TLS1.3"`}},
		{"insecure not a bool", "    tls: {insecure_skip_verify: yes}\n", []string{
			`upstreams.video.tls.insecure_skip_verify: must be true or false, got "yes"`}},
		{"insecure with ca_file", "    tls: {ca_file: " + dir + "ca.pem, insecure_skip_verify: true}\n", []string{
			`upstreams.video.tls.insecure_skip_verify: true skips the verification ca_file is for; set one of them`}},
		{"unknown field", "    tls: {ca_flie: x}\n", []string{
			`upstreams.video.tls.ca_flie: unknown field (did you mean "ca_file"?)`}},
		{"not a mapping", "    tls: true\n", []string{
			`upstreams.video.tls: must be a mapping, got true`}},
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

// TestUpstreamTLSDefaults: `tls: {}` is TLS 1.2+ verified against the
// system roots; omitted or null is clear text; min_version reads as a
// number or a string.
func TestUpstreamTLSDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head + "upstreams:\n" +
		"  a:\n    endpoints: [{address: 10.0.0.1:80}]\n    tls: {}\n" +
		"  b:\n    endpoints: [{address: 10.0.0.1:80}]\n    tls: ~\n" +
		"  c:\n    endpoints: [{address: 10.0.0.1:80}]\n    tls: {min_version: \"1.3\", server_name: 10.0.0.9}\n" +
		"  video:\n    endpoints: [{address: 10.0.0.1:80}]\n    tls: {min_version: 1.3}\n" + routes))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Upstreams["a"].TLS, (&UpstreamTLS{MinVersion: "1.2"}); !reflect.DeepEqual(got, want) {
		t.Errorf("tls: {}: %+v, want %+v", got, want)
	}
	if cfg.Upstreams["a"].TLS.TLSVersion() != tls.VersionTLS12 {
		t.Error("1.2 is not tls.VersionTLS12")
	}
	if cfg.Upstreams["b"].TLS != nil {
		t.Errorf("tls: ~ turned TLS on: %+v", cfg.Upstreams["b"].TLS)
	}
	for _, name := range []string{"c", "video"} {
		if v := cfg.Upstreams[name].TLS; v.MinVersion != "1.3" || v.TLSVersion() != tls.VersionTLS13 {
			t.Errorf("%s: min_version %q", name, v.MinVersion)
		}
	}
}
