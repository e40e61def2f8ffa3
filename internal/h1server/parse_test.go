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
	many := strings.Repeat("A: b\r\n", maxFields)
	for _, tc := range []struct {
		name string
		head string
		want verdict
		// for verdictReject: the status (0: 400) and reason text; for a
		// handoff: the reason
		status  int
		text    string
		handoff int
	}{
		{"get", "GET /a?b=c HTTP/1.1\r\nHost: x\r\n\r\n", verdictServe, 0, "", 0},
		{"http/1.0 without host", "GET / HTTP/1.0\r\n\r\n", verdictServe, 0, "", 0},
		{"content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", verdictServe, 0, "", 0},
		{"duplicate equal content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", verdictServe, 0, "", 0},
		{"leading zeros content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 007\r\n\r\n", verdictServe, 0, "", 0},
		{"empty host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", verdictServe, 0, "", 0},
		{"obs-text value", "GET / HTTP/1.1\r\nHost: x\r\nX: caf\xc3\xa9\r\n\r\n", verdictServe, 0, "", 0},
		{"exactly maxFields", "GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("A: b\r\n", maxFields-1) + "\r\n", verdictServe, 0, "", 0},

		{"empty request line", "\r\n", verdictReject, 0, "", 0},
		{"no target", "GET\r\n\r\n", verdictReject, 0, "", 0},
		{"http/0.9 line", "GET /\r\n\r\n", verdictReject, 0, "", 0},
		{"double space", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", verdictReject, 0, textBadRequestLine, 0},
		{"bad method", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", verdictReject, 0, "", 0},
		{"bad version", "GET / HTTX/1.1\r\nHost: x\r\n\r\n", verdictReject, 0, textBadRequestLine, 0},
		{"version with space", "GET / HTTP/1.1 \r\nHost: x\r\n\r\n", verdictReject, 0, textBadRequestLine, 0},
		{"http/2.0 line", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", verdictReject, 505, textBadVersion, 0},
		{"http/0.9 version", "GET / HTTP/0.9\r\nHost: x\r\n\r\n", verdictReject, 505, textBadVersion, 0},
		{"http/3.0", "GET / HTTP/3.0\r\nHost: x\r\n\r\n", verdictReject, 505, textBadVersion, 0},
		{"preface with fields", "PRI * HTTP/2.0\r\nHost: x\r\n\r\n", verdictReject, 505, textBadVersion, 0},
		{"PRI on http/1.1", "PRI / HTTP/1.1\r\nHost: x\r\n\r\n", verdictReject, 0, textPRI, 0},
		{"control byte in target", "GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n", verdictReject, 0, "", 0},
		{"NUL in target", "GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n", verdictReject, 0, "", 0},
		{"bare CR in request line", "GET /\r HTTP/1.1\r\nHost: x\r\n\r\n", verdictReject, 0, "", 0},
		{"missing host", "GET / HTTP/1.1\r\n\r\n", verdictReject, 0, "missing required Host header", 0},
		{"missing host, absolute form", "GET http://x/ HTTP/1.1\r\n\r\n", verdictReject, 0, "missing required Host header", 0},
		{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", verdictReject, 0, "", 0},
		{"malformed host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", verdictReject, 0, "malformed Host header", 0},
		{"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", verdictReject, 0, textBadField, 0},
		{"no colon", "GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", verdictReject, 0, textBadField, 0},
		{"empty name", "GET / HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n", verdictReject, 0, textBadField, 0},
		{"NUL in name", "GET / HTTP/1.1\r\nHost: x\r\nX\x00Y: v\r\n\r\n", verdictReject, 0, textBadField, 0},
		{"NUL in value", "GET / HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n", verdictReject, 0, textBadField, 0},
		{"DEL in value", "GET / HTTP/1.1\r\nHost: x\r\nX: a\x7fb\r\n\r\n", verdictReject, 0, textBadField, 0},
		{"bare CR in value", "GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", verdictReject, 0, textBadField, 0},
		{"bare CR line", "GET / HTTP/1.1\r\nHost: x\r\n\r\r\n\r\n", verdictReject, 0, textBadField, 0},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", verdictReject, 0, textObsFold, 0},
		{"obs-fold tab", "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n\tb\r\n\r\n", verdictReject, 0, textObsFold, 0},
		{"obs-fold first line", "GET / HTTP/1.1\r\n Host: x\r\n\r\n", verdictReject, 0, textObsFold, 0},
		{"conflicting content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", verdictReject, 0, textBadCL, 0},
		{"content-length list", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\n", verdictReject, 0, textBadCL, 0},
		{"negative content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", verdictReject, 0, textBadCL, 0},
		{"signed content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\n", verdictReject, 0, textBadCL, 0},
		{"hex content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x5\r\n\r\n", verdictReject, 0, textBadCL, 0},
		{"empty content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", verdictReject, 0, textBadCL, 0},
		{"huge content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", verdictReject, 0, textBadCL, 0},
		{"content-length and chunked", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", verdictReject, 0, textCLAndTE, 0},
		{"chunked and content-length", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", verdictReject, 0, textCLAndTE, 0},
		{"content-length and identity", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: identity\r\n\r\n", verdictReject, 0, textCLAndTE, 0},
		{"te on http/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", verdictReject, 0, textTEOnHTTP10, 0},
		{"te gzip", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", verdictReject, 0, textBadTE, 0},
		{"te identity", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n", verdictReject, 0, textBadTE, 0},
		{"te chunked twice", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", verdictReject, 0, textBadTE, 0},
		{"te chunked on two lines", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", verdictReject, 0, textBadTE, 0},
		{"te chunked not last", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", verdictReject, 0, textBadTE, 0},
		{"te empty", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n\r\n", verdictReject, 0, textBadTE, 0},
		{"te empty element", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked,\r\n\r\n", verdictReject, 0, textBadTE, 0},
		{"te with parameter", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked;x=1\r\n\r\n", verdictReject, 0, textBadTE, 0},
		{"te gzip then chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", verdictReject, 501, textUnsupportedTE, 0},
		{"te gzip line, chunked line", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", verdictReject, 501, textUnsupportedTE, 0},
		{"many fields and content-length with chunked", "POST / HTTP/1.1\r\nHost: x\r\n" + many + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", verdictReject, 0, textCLAndTE, 0},
		{"many fields and obs-fold", "GET / HTTP/1.1\r\nHost: x\r\n" + many + "X: a\r\n b\r\n\r\n", verdictReject, 0, textObsFold, 0},
		{"many fields and NUL", "GET / HTTP/1.1\r\nHost: x\r\n" + many + "X: \x00\r\n\r\n", verdictReject, 0, textBadField, 0},
		{"many fields and two hosts", "GET / HTTP/1.1\r\nHost: x\r\n" + many + "Host: y\r\n\r\n", verdictReject, 0, "", 0},
		{"absolute form and content-length with chunked", "POST http://x/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", verdictReject, 0, textCLAndTE, 0},
		{"connect and content-length with chunked", "CONNECT x:443 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", verdictReject, 0, textCLAndTE, 0},
		{"http/1.2 and content-length with chunked", "POST / HTTP/1.2\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", verdictReject, 0, textCLAndTE, 0},
		{"http/1.2 without host", "GET / HTTP/1.2\r\n\r\n", verdictReject, 0, "missing required Host header", 0},

		{"h2c preface", "PRI * HTTP/2.0\r\n\r\n", verdictHandoff, 0, "", handoffH2Preface},
		{"websocket", "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", verdictHandoff, 0, "", handoffUpgrade},
		{"expect", "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", verdictHandoff, 0, "", handoffExpect},
		{"chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", verdictHandoff, 0, "", handoffTransferEncoding},
		{"Chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:  Chunked \r\n\r\n", verdictHandoff, 0, "", handoffTransferEncoding},
		{"absolute form", "GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n", verdictHandoff, 0, "", handoffOther},
		{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", verdictHandoff, 0, "", handoffOther},
		{"connect", "CONNECT x:443 HTTP/1.1\r\nHost: x\r\n\r\n", verdictHandoff, 0, "", handoffOther},
		{"connect without host", "CONNECT x:443 HTTP/1.1\r\n\r\n", verdictHandoff, 0, "", handoffOther},
		{"http/1.2", "GET / HTTP/1.2\r\nHost: x\r\n\r\n", verdictHandoff, 0, "", handoffOther},
		{"many fields", "GET / HTTP/1.1\r\nHost: x\r\n" + many + "\r\n", verdictHandoff, 0, "", handoffOther},
		{"many connection fields", "GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("Connection: x\r\n", maxConnFields+1) + "\r\n", verdictHandoff, 0, "", handoffOther},
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
				t.Fatalf("verdict %d, want %d (reject %d %q)", got, tc.want, h.status, h.rejectText)
			}
			if got == verdictReject && (h.rejectText != tc.text || h.status != tc.status) {
				t.Errorf("reject %d %q, want %d %q", h.status, h.rejectText, tc.status, tc.text)
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
// purpose where net/http accepts it: obs-fold, Content-Length together
// with Transfer-Encoding, Transfer-Encoding on HTTP/1.0 (net/http ignores
// it), the PRI method on an HTTP/1 line, an empty request-target (which
// net/http takes for CONNECT). (Bare LF line ends, refused too,
// never reach parse: findHeadEnd flags them.)
func deliberateDifference(head []byte) bool {
	lower := bytes.ToLower(head)
	if bytes.Contains(head, []byte("\r\n ")) || bytes.Contains(head, []byte("\r\n\t")) {
		return true
	}
	te := bytes.Contains(lower, []byte("\ntransfer-encoding:"))
	if te && bytes.Contains(lower, []byte("\ncontent-length:")) {
		return true
	}
	line, _, _ := bytes.Cut(head, []byte("\r\n"))
	if te && bytes.HasSuffix(line, []byte(" HTTP/1.0")) {
		return true
	}
	if _, rest, ok := bytes.Cut(line, []byte(" ")); ok && bytes.HasPrefix(rest, []byte(" ")) {
		return true // method SP SP: an empty target
	}
	return bytes.HasPrefix(line, []byte("PRI "))
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
// the loop hands off, when net/http accepts it too, they agree on method,
// target, framing (chunked or Content-Length) and body length; whatever
// the loop rejects, net/http rejects too (but for the deliberate
// differences).
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
		"POST http://x/y?z HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.2\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		"CONNECT x:443 HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("A: b\r\n", maxFields) + "Content-Length: 2\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, _, bare := findHeadEnd(data, 0)
		if bare || n == 0 {
			return // a bare LF: refused by the loop before parse
		}
		orig := data[:n]
		raw := bytes.Clone(orig)
		var h head
		v := h.parse(raw)
		ref, refOK := referenceRequest(orig)
		switch v {
		case verdictReject:
			if refOK && !deliberateDifference(orig) {
				t.Fatalf("loop rejects (%d %q), net/http accepts %q", h.status, h.rejectText, orig)
			}
		case verdictHandoff:
			if h.handoff == handoffH2Preface || !refOK {
				return // HTTP/2, or net/http refuses what the loop let through: its answer stands
			}
			text := string(raw)
			if got, want := text[:h.m1], ref.Method; got != want {
				t.Fatalf("method %q, want %q (%q)", got, want, orig)
			}
			if got, want := text[h.t0:h.t1], ref.RequestURI; got != want {
				t.Fatalf("target %q, want %q (%q)", got, want, orig)
			}
			refChunked := len(ref.TransferEncoding) == 1 && ref.TransferEncoding[0] == "chunked"
			if h.chunked != refChunked {
				t.Fatalf("chunked %v, net/http %v (%q)", h.chunked, ref.TransferEncoding, orig)
			}
			length := max(h.length, 0)
			if h.chunked {
				length = -1
			}
			if length != ref.ContentLength {
				t.Fatalf("length %d, net/http %d (%q)", length, ref.ContentLength, orig)
			}
		case verdictServe:
			if h.chunked {
				t.Fatalf("the loop serves a chunked body: %q", orig)
			}
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
