package config

import (
	"reflect"
	"testing"
	"time"
)

// TestDiscoveryDefaults pins the defaults of the discovery and balancer
// blocks, from literals: a source alone gets every guard default, an etcd
// source its dial timeout, least_request without a block its options, and
// static endpoints beside discovery are kept as the initial set.
func TestDiscoveryDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head + "upstreams:\n  video:\n    balancer: least_request\n    discovery: {file: video.json}\n" +
		"  audio:\n    discovery: {etcd: {endpoints: [\"127.0.0.1:2379\"], prefix: /a/}}\n" + "    endpoints: [{address: 10.0.0.1:80, weight: 0}]\n" +
		"  plain:\n    endpoints: [{address: 10.0.0.1:80}]\n" + routes))
	if err != nil {
		t.Fatal(err)
	}
	video := cfg.Upstreams["video"]
	if want := (&Discovery{File: "video.json", MaxDropFraction: 0.5, ConfirmAfter: 30 * time.Second, MaxWeight: 10000}); !reflect.DeepEqual(video.Discovery, want) {
		t.Errorf("video discovery = %+v, want %+v", video.Discovery, want)
	}
	if want := (&LeastRequest{EWMA: false, Tau: 10 * time.Second}); !reflect.DeepEqual(video.LeastRequest, want) {
		t.Errorf("least_request defaults = %+v, want %+v", video.LeastRequest, want)
	}
	if video.Endpoints != nil || video.ConsistentHash != nil || video.Discovery.Source() != "file" {
		t.Errorf("video: endpoints %v, consistent_hash %+v, source %q", video.Endpoints, video.ConsistentHash, video.Discovery.Source())
	}
	audio := cfg.Upstreams["audio"]
	want := &Discovery{
		Etcd:            &EtcdDiscovery{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/a/", DialTimeout: 2 * time.Second},
		MaxDropFraction: 0.5, ConfirmAfter: 30 * time.Second, MaxWeight: 10000,
	}
	if !reflect.DeepEqual(audio.Discovery, want) || audio.Discovery.Source() != "etcd" {
		t.Errorf("audio discovery = %+v, want %+v", audio.Discovery, want)
	}
	if !reflect.DeepEqual(audio.Endpoints, []Endpoint{{Address: "10.0.0.1:80", Weight: 0}}) || audio.LeastRequest != nil {
		t.Errorf("audio: endpoints %+v, least_request %+v", audio.Endpoints, audio.LeastRequest)
	}
	if p := cfg.Upstreams["plain"]; p.Discovery != nil || p.LeastRequest != nil || p.ConsistentHash != nil || p.Balancer != "weighted_round_robin" {
		t.Errorf("plain upstream = %+v", p)
	}
}

func TestCheckEtcdEndpoint(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1:2379", ""},
		{"http://127.0.0.1:2379", ""},
		{"https://etcd.internal:2379", ""},
		{"https://[::1]:2379", ""},
		{"HTTP://127.0.0.1:2379", `scheme must be "http" or "https"`},
		{"unix://etcd.sock", `scheme must be "http" or "https"`},
		{"http://127.0.0.1:2379/", "must be host:port or http(s)://host:port, with no path, query or user"},
		{"http://u@etcd:2379", "must be host:port or http(s)://host:port, with no path, query or user"},
		{"http://etcd", "missing port in address"},
		{"etcd:0", "port must be a number from 1 to 65535"},
		{"", "missing port in address"},
	}
	for _, tt := range tests {
		if got := checkEtcdEndpoint(tt.in); got != tt.want {
			t.Errorf("checkEtcdEndpoint(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
