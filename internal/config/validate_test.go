package config

import (
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/config/engine"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0B", 0, true},
		{"512B", 512, true},
		{"1KB", 1000, true},
		{"10MB", 10_000_000, true},
		{"2GB", 2_000_000_000, true},
		{"1TB", 1_000_000_000_000, true},
		{"64KiB", 65536, true},
		{"10MiB", 10 << 20, true},
		{"1GiB", 1 << 30, true},
		{"3TiB", 3 << 40, true},
		{"64 KiB", 65536, true},
		{"8388607TiB", 8388607 << 40, true},
		{"8388608TiB", 0, false}, // 2^63: overflows int64
		{"99999999999999999999B", 0, false},
		{"", 0, false},
		{"KiB", 0, false},
		{"64", 0, false},
		{"64kib", 0, false},
		{"64Kib", 0, false},
		{"-1KiB", 0, false},
		{"+1KiB", 0, false},
		{"1.5KiB", 0, false},
		{"64KiB ", 0, false},
		{" 64KiB", 0, false},
		{"10 parsecs", 0, false},
	}
	for _, tt := range tests {
		got, ok := engine.ParseSize(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseSize(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCheckAddress(t *testing.T) {
	const endpoint, listener = false, true
	tests := []struct {
		in       string
		listener bool
		want     string
	}{
		{"10.0.0.1:80", endpoint, ""},
		{"[::1]:80", endpoint, ""},
		{"[fe80::1%eth0]:443", endpoint, ""},
		{"example.com:65535", endpoint, ""},
		{"example.com.:1", endpoint, ""},
		{"localhost:8080", endpoint, ""},
		{"a-b.c-d.example:80", endpoint, ""},
		{":8080", listener, ""},
		{"0.0.0.0:8080", listener, ""},
		{"127.0.0.1:0", listener, ""},
		{":0", listener, ""},
		{"[::]:443", listener, ""},
		{":8080", endpoint, "host is required"},
		{"10.0.0.1", endpoint, "missing port in address"},
		{"10.0.0.1", listener, "missing port in address"},
		{"::1:80", endpoint, "too many colons in address"},
		{"[::1]", endpoint, "missing port in address"},
		{"10.0.0.1:", endpoint, "port must be a number from 1 to 65535"},
		{"10.0.0.1:0", endpoint, "port must be a number from 1 to 65535"},
		{"10.0.0.1:65536", endpoint, "port must be a number from 1 to 65535"},
		{"10.0.0.1:65536", listener, "port must be a number from 0 to 65535"},
		{"10.0.0.1:+80", endpoint, "port must be a number from 1 to 65535"},
		{"10.0.0.1:-1", listener, "port must be a number from 0 to 65535"},
		{"10.0.0.1:123456", endpoint, "port must be a number from 1 to 65535"},
		{"[1.2.3.4]:80", endpoint, "brackets are only for IPv6 addresses"},
		{"-bad.example:80", endpoint, "host must be an IP address or a DNS name"},
		{"bad-.example:80", endpoint, "host must be an IP address or a DNS name"},
		{"a..b:80", endpoint, "host must be an IP address or a DNS name"},
		{"1.2.3:80", endpoint, "host must be an IP address or a DNS name"},
		{strings.Repeat("a", 64) + ".example:80", endpoint, "host must be an IP address or a DNS name"},
		{strings.Repeat("abcdefg.", 32) + "com:80", endpoint, "host must be an IP address or a DNS name"},
		{"exa mple.com:80", endpoint, "host must be an IP address or a DNS name"},
		{"bad_host:80", listener, "host must be an IP address or a DNS name"},
	}
	for _, tt := range tests {
		if got := checkAddress(tt.in, tt.listener); got != tt.want {
			t.Errorf("checkAddress(%q, listener=%v) = %q, want %q", tt.in, tt.listener, got, tt.want)
		}
	}
}

func TestSameBinding(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{":8080", ":8080", true},
		{":8080", "127.0.0.1:8080", true},
		{"0.0.0.0:8080", "10.0.0.1:8080", true},
		{"[::]:8080", "127.0.0.1:8080", true},
		{"LocalHost:8080", "localhost:8080", true},
		{":8080", ":8081", false},
		{"127.0.0.1:8080", "127.0.0.2:8080", false},
		{"127.0.0.1:080", "127.0.0.1:80", true},
		{"127.0.0.1:0", "127.0.0.1:0", false}, // each gets its own free port
		{":0", ":0", false},
	}
	for _, tt := range tests {
		if got := sameBinding(tt.a, tt.b); got != tt.want {
			t.Errorf("sameBinding(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1: "1B", 1000: "1000B", 1024: "1KiB", 1536: "1536B", 16 << 20: "16MiB", 4 << 30: "4GiB", 1 << 40: "1TiB"} {
		if got := engine.FormatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
