package h1server

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"reflect"
	"strings"
	"testing"
)

func TestParseHead(t *testing.T) {
	for _, tc := range []struct {
		name string
		head string
		want verdict
		// for verdictReject: net/http's reason text; for handoff: the reason
		text    string
		handoff int
	}{
		{"get", "GET /a?b=c HTTP/1.1\r\nHost: x\r\n\r\n", verdictServe, "", 0},
		{"http/1.0 without host", "GET / HTTP/1.0\r\n\r\n", verdictServe, "", 0},
		{"content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", verdictServe, "", 0},
		{"duplicate equal content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", verdictServe, "", 0},
		{"empty host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", verdictServe, "", 0},
		{"obs-text value", "GET / HTTP/1.1\r\nHost: x\r\nX: caf\xc3\xa9\r\n\r\n", verdictServe, "", 0},

		{"empty request line", "\r\n", verdictReject, "", 0},
		{"no target", "GET\r\n\r\n", verdictReject, "", 0},
		{"double space", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", verdictReject, "", 0},
		{"bad method", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", verdictReject, "", 0},
		{"bad version", "GET / HTTX/1.1\r\nHost: x\r\n\r\n", verdictReject, "", 0},
		{"control byte in target", "GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n", verdictReject, "", 0},
		{"missing host", "GET / HTTP/1.1\r\n\r\n", verdictReject, "missing required Host header", 0},
		{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", verdictReject, "", 0},
		{"malformed host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", verdictReject, "malformed Host header", 0},
		{"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", verdictReject, "", 0},
		{"no colon", "GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", verdictReject, "", 0},
		{"empty name", "GET / HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n", verdictReject, "", 0},
		{"bad name byte", "GET / HTTP/1.1\r\nHost: x\r\nX\x00Y: v\r\n\r\n", verdictReject, "", 0},
		{"bad value byte", "GET / HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n", verdictReject, "", 0},
		{"CR in value", "GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", verdictReject, "", 0},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", verdictReject, "", 0},
		{"conflicting content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", verdictReject, "", 0},
		{"negative content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", verdictReject, "", 0},
		{"signed content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\n", verdictReject, "", 0},
		{"empty content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", verdictReject, "", 0},
		{"content-length and chunked", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", verdictReject, "", 0},

		{"h2c preface", "PRI * HTTP/2.0\r\n\r\n", verdictHandoff, "", handoffH2Preface},
		{"websocket", "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", verdictHandoff, "", handoffUpgrade},
		{"expect", "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", verdictHandoff, "", handoffExpect},
		{"chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", verdictHandoff, "", handoffTransferEncoding},
		{"absolute form", "GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n", verdictHandoff, "", handoffOther},
		{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", verdictHandoff, "", handoffOther},
		{"connect", "CONNECT x:443 HTTP/1.1\r\nHost: x\r\n\r\n", verdictHandoff, "", handoffOther},
		{"http/1.2", "GET / HTTP/1.2\r\nHost: x\r\n\r\n", verdictHandoff, "", handoffOther},
		{"many fields", "GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("A: b\r\n", maxFields) + "\r\n", verdictHandoff, "", handoffOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h head
			raw := []byte(tc.head)
			n, _, bare := findHeadEnd(raw, 0)
			if bare || n != len(raw) {
				t.Fatalf("findHeadEnd = %d (bare LF %v), want %d", n, bare, len(raw))
			}
			got := h.parse(raw)
			if got != tc.want {
				t.Fatalf("verdict %d, want %d", got, tc.want)
			}
			if got == verdictReject && h.rejectText != tc.text {
				t.Errorf("reject text %q, want %q", h.rejectText, tc.text)
			}
			if got == verdictHandoff && h.handoff != tc.handoff {
				t.Errorf("handoff reason %d, want %d", h.handoff, tc.handoff)
			}
		})
	}
}

func TestFindHeadEnd(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		bare bool
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\nrest", 27, false},
		{"GET / HTTP/1.1\r\nHost: x\r\n", 0, false},
		{"GET / HTTP/1.1\r\nHost: x\r\n\r", 0, false},
		{"GET / HTTP/1.1\nHost: x\r\n\r\n", 0, true},
		{"GET / HTTP/1.1\r\nHost: x\n\r\n", 0, true},
	} {
		n, _, bare := findHeadEnd([]byte(tc.in), 0)
		if n != tc.n || bare != tc.bare {
			t.Errorf("findHeadEnd(%q) = %d, %v; want %d, %v", tc.in, n, bare, tc.n, tc.bare)
		}
	}
}

// deliberateDifference reports whether head is rejected by the loop on
// purpose where net/http accepts it: obs-fold, or Content-Length together
// with Transfer-Encoding.
func deliberateDifference(head []byte) bool {
	lower := bytes.ToLower(head)
	if bytes.Contains(head, []byte("\r\n ")) || bytes.Contains(head, []byte("\r\n\t")) {
		return true
	}
	return bytes.Contains(lower, []byte("\ncontent-length:")) && bytes.Contains(lower, []byte("\ntransfer-encoding:"))
}

// referenceRequest parses head as net/http's server would: http.ReadRequest
// plus the checks its conn.readRequest adds. ok false: net/http answers
// 400 (or another error status).
func referenceRequest(head []byte) (*http.Request, bool) {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		return nil, false
	}
	if req.ProtoMajor != 1 {
		return nil, false
	}
	// http.ReadRequest drops Host from the map; the server checks it on
	// the map as read.
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	_, _ = tp.ReadLine()
	mime, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, false
	}
	hosts, haveHost := mime["Host"]
	if req.ProtoAtLeast(1, 1) && (!haveHost || len(hosts) == 0) && req.Method != "CONNECT" {
		return nil, false
	}
	if len(hosts) == 1 && !validHost([]byte(hosts[0])) {
		return nil, false
	}
	for k, vv := range req.Header {
		if !allTokenString(k) {
			return nil, false
		}
		for _, v := range vv {
			if hasCTL([]byte(strings.ReplaceAll(v, "\t", " "))) {
				return nil, false
			}
		}
	}
	delete(req.Header, "Host")
	return req, true
}

// FuzzParseHead is a differential fuzz of the head parser against
// net/http: whatever the loop serves, net/http accepts with the same
// method, URL, protocol, headers, host, length and close flag; whatever
// the loop rejects, net/http rejects too (but for the deliberate
// differences). Handoffs are net/http's to decide.
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"GET /a/b?c=d&e HTTP/1.1\r\nHost: example.com\r\nUser-Agent: x\r\nAccept: */*\r\n\r\n",
		"POST /p HTTP/1.1\r\nhost: h:80\r\ncontent-length: 3\r\nconnection: keep-alive, close\r\n\r\n",
		"GET /%41%2f?x HTTP/1.0\r\nConnection: Keep-Alive\r\nPragma: no-cache\r\n\r\n",
		"HEAD /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\nX:  a \t\r\nx: b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
		"GET /? HTTP/1.1\r\nHost: [::1]:8080\r\nContent-Length: 007\r\nContent-Length: 007\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"GET //x/../y;z HTTP/1.1\r\nHost: x\r\nFoo: a\r\n b\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, _, bare := findHeadEnd(data, 0)
		if bare || n == 0 {
			return
		}
		orig := data[:n]
		raw := bytes.Clone(orig)
		var h head
		v := h.parse(raw)
		ref, refOK := referenceRequest(orig)
		switch v {
		case verdictReject:
			if refOK && !deliberateDifference(orig) {
				t.Fatalf("loop rejects, net/http accepts %q", orig)
			}
		case verdictServe:
			text := string(raw)
			target := text[h.t0:h.t1]
			u, err := parseURL(target)
			if err != nil {
				if refOK {
					t.Fatalf("loop rejects the target %q, net/http accepts it: %q", target, orig)
				}
				return
			}
			if !refOK {
				t.Fatalf("loop serves, net/http rejects %q", orig)
			}
			host := ""
			if h.nHost == 1 {
				host = text[h.host.v0:h.host.v1]
			}
			hdr := h.header(text)
			length := max(h.length, 0)
			if got, want := text[:h.m1], ref.Method; got != want {
				t.Fatalf("method %q, want %q", got, want)
			}
			if !reflect.DeepEqual(u, ref.URL) {
				t.Fatalf("URL %#v, want %#v (%q)", u, ref.URL, orig)
			}
			if h.minor != ref.ProtoMinor || host != ref.Host || length != ref.ContentLength || h.closeRq != ref.Close {
				t.Fatalf("minor %d host %q length %d close %v; want %d %q %d %v (%q)",
					h.minor, host, length, h.closeRq, ref.ProtoMinor, ref.Host, ref.ContentLength, ref.Close, orig)
			}
			if !reflect.DeepEqual(hdr, ref.Header) {
				t.Fatalf("header %q, want %q (%q)", hdr, ref.Header, orig)
			}
		}
	})
}
