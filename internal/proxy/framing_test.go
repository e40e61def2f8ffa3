package proxy

import (
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestScreenUpgrade(t *testing.T) {
	ws := []string{"websocket"}
	for _, tc := range []struct {
		in      []string
		allowed []string
		want    []string // nil: Upgrade removed
	}{
		{[]string{"websocket"}, ws, []string{"websocket"}},
		{[]string{"WebSocket"}, ws, []string{"WebSocket"}},
		{[]string{"h2c"}, ws, nil},
		{[]string{"h2c, websocket"}, ws, []string{"websocket"}},
		{[]string{"h2c", "websocket/13"}, ws, []string{"websocket/13"}},
		{[]string{"websocket"}, nil, nil},
		{[]string{"foo, bar/2"}, []string{"bar"}, []string{"bar/2"}},
		{[]string{" , "}, ws, nil},
	} {
		hdr := http.Header{"Upgrade": tc.in}
		screenUpgrade(hdr, tc.allowed)
		if got := hdr["Upgrade"]; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Upgrade %q allowed %q: %q, want %q", tc.in, tc.allowed, got, tc.want)
		}
	}
}

func TestSwitchRequested(t *testing.T) {
	for _, tc := range []struct {
		req, resp http.Header
		want      bool
	}{
		{http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, http.Header{"Upgrade": {"websocket"}}, true},
		{http.Header{"Connection": {"upgrade"}, "Upgrade": {"WebSocket/13"}}, http.Header{"Upgrade": {"websocket"}}, true},
		{http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, http.Header{"Upgrade": {"h2c"}}, false},
		{http.Header{"Upgrade": {"websocket"}}, http.Header{"Upgrade": {"websocket"}}, false}, // not in Connection
		{http.Header{}, http.Header{"Upgrade": {"h2c"}}, false},
		{http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, http.Header{}, false},
		{http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, http.Header{"Upgrade": {"websocket, h2c"}}, false},
	} {
		if got := switchRequested(tc.req, tc.resp); got != tc.want {
			t.Errorf("request %v, answer %v: %v, want %v", tc.req, tc.resp, got, tc.want)
		}
	}
}

func TestScreenHeaders(t *testing.T) {
	in := func() http.Header {
		return http.Header{"X-Api_key": {"k"}, "X_y": {"1"}, "X-Kept": {"2"}, "Http2-Settings": {"AAAA"}}
	}
	for _, tc := range []struct {
		mode UnderscoreMode
		ok   bool
		keys []string
	}{
		{UnderscoresDrop, true, []string{"X-Kept"}},
		{UnderscoresAllow, true, []string{"X-Api_key", "X-Kept", "X_y"}},
		{UnderscoresReject, false, nil},
	} {
		h := &Handler{underscores: tc.mode}
		hdr := in()
		if ok := h.screenHeaders(hdr); ok != tc.ok {
			t.Errorf("mode %d: %v, want %v", tc.mode, ok, tc.ok)
		}
		if !tc.ok {
			continue
		}
		var keys []string
		for k := range hdr {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, tc.keys) {
			t.Errorf("mode %d: headers %v, want %v", tc.mode, keys, tc.keys)
		}
	}
}

// TestScreenTrailers: the outbound trailer map holds only the allowed,
// declared names, filled from the inbound trailers when the body ends.
func TestScreenTrailers(t *testing.T) {
	r := &http.Request{
		Body:    io.NopCloser(strings.NewReader("hello")),
		Trailer: http.Header{"X-Checksum": nil, "Host": nil, "X-Other": nil},
	}
	screenTrailers(r, []string{"X-Checksum", "Host", "X-Absent"})
	fwd := outboundTrailer(r)
	if !reflect.DeepEqual(fwd, http.Header{"X-Checksum": nil}) {
		t.Fatalf("before the body: %v", fwd)
	}
	r.Trailer["X-Checksum"] = []string{"abc"} // as the server sets them at the body's end
	r.Trailer["Host"] = []string{"evil"}
	r.Trailer["Levee-App"] = []string{"admin"}
	if b, _ := io.ReadAll(r.Body); string(b) != "hello" {
		t.Fatalf("body %q", b)
	}
	if !reflect.DeepEqual(fwd, http.Header{"X-Checksum": {"abc"}}) {
		t.Fatalf("after the body: %v", fwd)
	}
	plain := &http.Request{Body: http.NoBody, Trailer: http.Header{"X-Checksum": {"abc"}}}
	screenTrailers(plain, nil)
	if outboundTrailer(plain) != nil {
		t.Fatal("a route without forward_trailers forwards trailers")
	}
}
