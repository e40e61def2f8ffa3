package grpcwire

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseTimeout(t *testing.T) {
	good := map[string]time.Duration{
		"1n": 1, "0S": 0, "10m": 10 * time.Millisecond, "99999999u": 99999999 * time.Microsecond,
		"3S": 3 * time.Second, "2M": 2 * time.Minute, "1H": time.Hour, "00000001H": time.Hour,
		"99999999H": math.MaxInt64, "99999999M": 99999999 * time.Minute,
	}
	for in, want := range good {
		if got, err := ParseTimeout(in); err != nil || got != want {
			t.Errorf("ParseTimeout(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "S", "1", "1s", "1h", "-1S", "+1S", " 1S", "1S ", "123456789S", "1.5S", "1µ", "1SS", "0x1S", "１S"} {
		if d, err := ParseTimeout(in); err == nil {
			t.Errorf("ParseTimeout(%q) = %v, want an error", in, d)
		}
	}
}

func TestAppendTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "1n", -time.Second: "1n", 1: "1n", 99999999: "99999999n", 100000000: "100000u",
		100000001: "100001u", 5 * time.Second: "5000000u", 2 * time.Hour: "7200000m",
		math.MaxInt64: "2562048H",
	} {
		if got := string(AppendTimeout(nil, d)); got != want {
			t.Errorf("AppendTimeout(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestMessageEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"plain text": "plain text", "100%": "100%25", "a\nb": "a%0Ab", "café": "caf%C3%A9", "": "",
	} {
		if got := EncodeMessage(in); got != want {
			t.Errorf("EncodeMessage(%q) = %q, want %q", in, got, want)
		}
		if got := DecodeMessage(want); got != in {
			t.Errorf("DecodeMessage(%q) = %q, want %q", want, got, in)
		}
	}
	// Malformed escapes are kept as sent.
	for _, in := range []string{"%", "%4", "%zz", "50% off", "%%41"} {
		want := in
		if in == "%%41" {
			want = "%A"
		}
		if got := DecodeMessage(in); got != want {
			t.Errorf("DecodeMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsGRPC(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc": true, "application/grpc+proto": true, "application/grpc+json": true,
		"application/grpc; charset=utf-8": true, "Application/GRPC": true,
		"application/grpc-web": false, "application/grpc-web+proto": false, "application/json": false,
		"application/grp": false, "": false, "text/plain": false,
	} {
		if got := IsGRPC(ct); got != want {
			t.Errorf("IsGRPC(%q) = %v", ct, got)
		}
	}
	h := http.Header{"Content-Type": {"application/grpc"}}
	if n := testing.AllocsPerRun(100, func() { IsGRPCRequest(h) }); n != 0 {
		t.Errorf("IsGRPCRequest allocates %v", n)
	}
}

func TestCodes(t *testing.T) {
	if len(Names()) != 16 || Names()[0] != "cancelled" || Names()[15] != "unauthenticated" {
		t.Fatalf("Names() = %v", Names())
	}
	for i := Code(0); i <= 16; i++ {
		if c, ok := CodeByName(i.Name()); !ok || c != i {
			t.Errorf("CodeByName(%q) = %v, %v", i.Name(), c, ok)
		}
	}
	if _, ok := CodeByName("UNAVAILABLE"); ok {
		t.Error("names are lower case")
	}
	if Code(17).Name() != "17" {
		t.Error(Code(17).Name())
	}
	for status, want := range map[int]Code{
		400: Internal, 401: Unauthenticated, 403: PermissionDenied, 404: Unimplemented, 405: Unimplemented,
		408: DeadlineExceeded, 413: ResourceExhausted, 429: ResourceExhausted, 431: ResourceExhausted,
		406: Internal, 500: Internal, 502: Unavailable, 503: Unavailable, 504: DeadlineExceeded, 200: Unknown,
	} {
		if got := FromHTTPStatus(status); got != want {
			t.Errorf("FromHTTPStatus(%d) = %v, want %v", status, got.Name(), want.Name())
		}
	}
	for v, want := range map[string]int{"0": 0, "14": 14, "999": 999, "": -1, "1000": -1, "-1": -1, "1a": -1} {
		c, ok := StatusOf(http.Header{"Grpc-Status": {v}})
		if (want < 0) == ok || (ok && int(c) != want) {
			t.Errorf("StatusOf(%q) = %v, %v", v, c, ok)
		}
	}
}

func TestWriteTrailersOnly(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Length", "40")
	rec.Header().Set("Retry-After", "1")
	WriteTrailersOnly(rec, ResourceExhausted, "rate limited: 100% used", "rate_limited")
	h := rec.Result().Header
	if rec.Code != 200 || h.Get("Content-Type") != "application/grpc" || h.Get("Grpc-Status") != "8" ||
		h.Get("Grpc-Message") != "rate limited: 100%25 used" || h.Get("Levee-Reason") != "rate_limited" ||
		h.Get("Content-Length") != "" || h.Get("Retry-After") != "1" || rec.Body.Len() != 0 {
		t.Fatalf("%d %v %q", rec.Code, h, rec.Body.String())
	}
}

// FuzzParseTimeout: whatever ParseTimeout accepts follows the grammar, and
// a value it accepts formats back (AppendTimeout) to a timeout at least as
// long that parses again.
func FuzzParseTimeout(f *testing.F) {
	for _, s := range []string{"1S", "99999999H", "0n", "12m", "1x", "", "123456789S", "-1S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTimeout(s)
		if err != nil {
			return
		}
		if d < 0 || len(s) < 2 || len(s) > 9 || strings.Trim(s[:len(s)-1], "0123456789") != "" || !strings.Contains("HMSmun", s[len(s)-1:]) {
			t.Fatalf("accepted %q as %v", s, d)
		}
		enc := AppendTimeout(nil, d)
		back, err := ParseTimeout(string(enc))
		if err != nil {
			t.Fatalf("%q → %v → %q: %v", s, d, enc, err)
		}
		if d > 0 && back < d {
			t.Fatalf("%q → %v → %q → %v: shorter", s, d, enc, back)
		}
	})
}

// FuzzMessage: DecodeMessage(EncodeMessage(s)) is s; an encoded message is
// printable ASCII; DecodeMessage never panics on any input.
func FuzzMessage(f *testing.F) {
	for _, s := range []string{"", "ok", "100%", "%zz", "café\n", "%C3%A9", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := EncodeMessage(s)
		for i := 0; i < len(enc); i++ {
			if enc[i] < 0x20 || enc[i] > 0x7E {
				t.Fatalf("EncodeMessage(%q) = %q: not printable ASCII", s, enc)
			}
		}
		if got := DecodeMessage(enc); got != s {
			t.Fatalf("DecodeMessage(EncodeMessage(%q)) = %q", s, got)
		}
		dec := DecodeMessage(s)
		if len(dec) > len(s) || (utf8.ValidString(s) && !strings.Contains(s, "%") && dec != s) {
			t.Fatalf("DecodeMessage(%q) = %q", s, dec)
		}
	})
}
