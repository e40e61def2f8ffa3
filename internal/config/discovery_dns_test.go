package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestDNSDiscoveryParse pins the dns and dns_srv sources' defaults and the
// errors of bad values, with their field paths.
func TestDNSDiscoveryParse(t *testing.T) {
	cfg, err := Parse([]byte(head + "upstreams:\n  video:\n    discovery: {dns: {name: \"api.internal:8080\"}}\n" +
		"  audio:\n    discovery: {dns_srv: {name: _http._tcp.api.internal, resolver: \"127.0.0.1:5353\", zone: b, timeout: 500ms}}\n" + routes))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Upstreams["video"].Discovery.DNS, (&DNSDiscovery{Name: "api.internal:8080", Weight: 1, Timeout: 2 * time.Second}); !reflect.DeepEqual(got, want) {
		t.Errorf("dns = %+v, want %+v", got, want)
	}
	if got, want := cfg.Upstreams["audio"].Discovery.DNSSRV, (&DNSSRVDiscovery{Name: "_http._tcp.api.internal", Zone: "b", Resolver: "127.0.0.1:5353", Timeout: 500 * time.Millisecond}); !reflect.DeepEqual(got, want) {
		t.Errorf("dns_srv = %+v, want %+v", got, want)
	}
	if s := cfg.Upstreams["audio"].Discovery.Source(); s != "dns_srv" {
		t.Errorf("source %q", s)
	}

	_, err = Parse([]byte(head + "upstreams:\n" +
		"  a:\n    discovery: {dns: {name: \"10.0.0.1:80\"}}\n" +
		"  b:\n    discovery: {dns: {name: api.internal, weight: 0, resolver: dns.internal:53, timeout: 1m}}\n" +
		"  c:\n    discovery: {dns_srv: {name: api.internal, resolver: \"127.0.0.1:0\"}}\n" +
		"  d:\n    discovery: {dns: {name: \"x.internal:80\"}, dns_srv: {name: _a._tcp.x}}\n" +
		"  e:\n    discovery: {dns_srv: {}}\n" + routes))
	if err == nil {
		t.Fatal("bad dns sources accepted")
	}
	for _, want := range []string{
		`upstreams.a.discovery.dns.name: host must be a DNS name, not an IP address (list an address under endpoints), got "10.0.0.1:80"`,
		`upstreams.b.discovery.dns.name: must be host:port with host a DNS name: missing port in address, got "api.internal"`,
		"upstreams.b.discovery.dns.weight: must be a number from 1 to 10000, got 0",
		`upstreams.b.discovery.dns.resolver: must be ip:port, as in "127.0.0.1:53" or "[::1]:53", got "dns.internal:53"`,
		"upstreams.b.discovery.dns.timeout: must be from 100ms to 30s, got \"1m\"",
		`upstreams.c.discovery.dns_srv.name: must be "_service._proto.domain", as in "_http._tcp.api.internal", got "api.internal"`,
		`upstreams.c.discovery.dns_srv.resolver: must be ip:port, as in "127.0.0.1:53" or "[::1]:53", got "127.0.0.1:0"`,
		"upstreams.d.discovery: exactly one of file, etcd, dns, dns_srv or push is required",
		"upstreams.e.discovery.dns_srv.name: required",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing error %q in:\n%v", want, err)
		}
	}
}

func TestCheckSRVName(t *testing.T) {
	for s, ok := range map[string]bool{
		"_http._tcp.api.internal": true, "_http._tcp.api.internal.": true, "_x-y._udp.a": true,
		"http._tcp.a": false, "_http.tcp.a": false, "_._tcp.a": false, "_http._tcp": false, "_http._tcp.": false,
		"_h ttp._tcp.a": false, "_http._tcp.-a": false, "": false,
	} {
		if got := checkSRVName(s) == ""; got != ok {
			t.Errorf("checkSRVName(%q) ok = %v, want %v", s, got, ok)
		}
	}
}
