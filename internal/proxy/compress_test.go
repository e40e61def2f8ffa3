package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/upstream"
)

// compressFront is levee's handler on a loopback listener, with one route
// compressing by c in front of the upstream handler up (itself on a real
// loopback listener), and a client that asks for no coding of its own.
type compressFront struct {
	url    string
	client *http.Client
}

func newCompressFront(t testing.TB, up http.Handler, c *Compression) *compressFront {
	t.Helper()
	var addr string
	if up != nil {
		us := httptest.NewServer(up)
		t.Cleanup(us.Close)
		addr = us.Listener.Addr().String()
	} else {
		// Nothing listens: every attempt fails (a refusal of levee's own).
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	tr := upstream.NewTransport(defaultOpts())
	ep := endpoint.New(addr, 1)
	u := (&Upstream{Name: "up", Transport: tr}).WithBalance(&Balance{Endpoints: []*endpoint.Endpoint{ep}, Picker: balance.NewSmoothWeighted([]*endpoint.Endpoint{ep})})
	rt := &Route{Name: "all", PathPrefix: "/", Upstream: u, Compression: c, BufferAnswerBytes: 1 << 20}
	front := httptest.NewServer(newTestHandler(t, []*Route{rt}, []*Upstream{u}))
	ctr := &http.Transport{DisableCompression: true}
	t.Cleanup(func() {
		ctr.CloseIdleConnections()
		front.Close()
		tr.Close()
	})
	return &compressFront{url: front.URL, client: &http.Client{Transport: ctr, Timeout: 10 * time.Second}}
}

// get sends method path with Accept-Encoding ae (none when empty) and
// extra headers, and returns the answer with its raw (still coded) body.
func (f *compressFront) get(t testing.TB, method, path, ae string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ae != "" {
		req.Header.Set("Accept-Encoding", ae)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func defaultCompression() *Compression {
	return &Compression{Types: []string{"application/json", "application/x-ndjson", "text/*"}, MinBytes: 1024,
		Encodings: []Encoding{EncodingZstd, EncodingBrotli, EncodingGzip}}
}

// decode undoes coding on body.
func decode(t testing.TB, coding string, body []byte) []byte {
	t.Helper()
	var r io.Reader
	switch coding {
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("gzip: %v", err)
		}
		r = zr
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	default:
		return body
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decoding %s: %v", coding, err)
	}
	return out
}

// jsonAnswer is n bytes of JSON rows, as an API answers.
func jsonAnswer(n int) []byte {
	var b bytes.Buffer
	b.WriteString("[")
	for i := 0; b.Len() < n-64; i++ {
		fmt.Fprintf(&b, `{"id":%d,"name":"product %d","price":%d.%02d,"tags":["a","b"]},`, i, i*7919%10007, i%500, i%100)
	}
	b.WriteString(`{"end":true}]`)
	for b.Len() < n {
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

// TestCompressRoundTrip: a 64 KiB JSON answer of known length, for each
// coding at each level, arrives coded, chunked, smaller, with Vary and a
// weakened ETag, and decodes to the upstream's bytes.
func TestCompressRoundTrip(t *testing.T) {
	body := jsonAnswer(64 << 10)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Accept-Ranges", "bytes")
		w.Write(body)
	})
	for _, level := range []CompressLevel{LevelFast, LevelDefault, LevelBest} {
		c := defaultCompression()
		c.Level = level
		f := newCompressFront(t, up, c)
		for _, coding := range []string{"gzip", "br", "zstd"} {
			resp, raw := f.get(t, http.MethodGet, "/items", coding)
			if got := resp.Header.Get("Content-Encoding"); got != coding {
				t.Fatalf("level %d %s: Content-Encoding %q", level, coding, got)
			}
			if resp.ContentLength != -1 || resp.Header.Get("Content-Length") != "" || len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
				t.Errorf("level %d %s: Content-Length %d %q, Transfer-Encoding %q; want chunked", level, coding, resp.ContentLength, resp.Header.Get("Content-Length"), resp.TransferEncoding)
			}
			if got := resp.Header.Get("Vary"); got != "Accept-Encoding" {
				t.Errorf("level %d %s: Vary %q", level, coding, got)
			}
			if got := resp.Header.Get("ETag"); got != `W/"v1"` {
				t.Errorf("level %d %s: ETag %q, want W/\"v1\"", level, coding, got)
			}
			if got := resp.Header.Get("Accept-Ranges"); got != "" {
				t.Errorf("level %d %s: Accept-Ranges %q on a coded answer", level, coding, got)
			}
			if got := decode(t, coding, raw); !bytes.Equal(got, body) {
				t.Fatalf("level %d %s: decoded %d bytes differ from the upstream's %d", level, coding, len(got), len(body))
			}
			if len(raw) >= len(body)/3 {
				t.Errorf("level %d %s: %d bytes coded from %d: want at least 3:1", level, coding, len(raw), len(body))
			}
			t.Logf("level %d %-4s: %6d -> %6d bytes (%.1f%%)", level, coding, len(body), len(raw), 100*float64(len(raw))/float64(len(body)))
		}
		// Without Accept-Encoding: as is, but Vary still says it could vary.
		resp, raw := f.get(t, http.MethodGet, "/items", "")
		if resp.Header.Get("Content-Encoding") != "" || !bytes.Equal(raw, body) || resp.Header.Get("Vary") != "Accept-Encoding" || resp.Header.Get("ETag") != `"v1"` {
			t.Errorf("no Accept-Encoding: Content-Encoding %q, %d bytes, Vary %q, ETag %q", resp.Header.Get("Content-Encoding"), len(raw), resp.Header.Get("Vary"), resp.Header.Get("ETag"))
		}
	}
}

// TestCompressNegotiation: the coding chosen for each Accept-Encoding, over
// real sockets, with levee's order zstd, br, gzip.
func TestCompressNegotiation(t *testing.T) {
	body := jsonAnswer(4 << 10)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	f := newCompressFront(t, up, defaultCompression())
	for _, tc := range []struct{ ae, want string }{
		{"gzip", "gzip"},
		{"br", "br"},
		{"zstd", "zstd"},
		{"gzip, deflate, br, zstd", "zstd"}, // ties: levee's order
		{"gzip, deflate, br", "br"},
		{"gzip;q=1.0, br;q=0.9", "gzip"},
		{"gzip;q=0.5, zstd;q=0.4, br;q=0.6", "br"},
		{"zstd;q=0, br;q=0, gzip", "gzip"},
		{"gzip;q=0", ""},
		{"gzip;q=0.000", ""},
		{"*", "zstd"},
		{"*;q=0", ""},
		{"*;q=0.1, gzip;q=0.5", "gzip"},
		{"*, zstd;q=0", "br"},
		{"*;q=0, br", "br"},
		{"identity", ""},
		{"identity;q=1, gzip;q=0.5", ""}, // identity preferred
		{"identity;q=0.5, gzip;q=0.5", "gzip"},
		{"identity;q=0, gzip;q=0.1", "gzip"},
		{"deflate, compress", ""}, // nothing levee applies
		{"x-unknown", ""},
		{"GZIP", "gzip"},   // codings are case-insensitive
		{"Br;Q=0.8", "br"}, // and so is the weight's name
		{"  gzip  ;  q=0.8  ,  br ; q=0.9 ", "br"},
		{"\tgzip\t", "gzip"},
		{",, gzip ,", "gzip"},
		{"gzip;q=1.5", ""}, // bad q-values: the whole field is ignored
		{"gzip;q=-1", ""},
		{"gzip;q=0.1234", ""},
		{"gzip;q=.5", ""},
		{"gzip;q=1.001", ""},
		{"gzip;q=", ""},
		{"gzip;level=9", ""},
		{"gzip q=1", ""},
		{"gzip;q=0.5;q=0.6", ""},
		{"br;q=1, gzip;q=abc", ""},
		{strings.Repeat("x, ", 40) + "gzip", ""},          // over 32 elements
		{"gzip," + strings.Repeat(" ", 1100) + ",br", ""}, // over 1 KiB
	} {
		resp, raw := f.get(t, http.MethodGet, "/n", tc.ae)
		if got := resp.Header.Get("Content-Encoding"); got != tc.want {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want %q", tc.ae, got, tc.want)
			continue
		}
		if got := decode(t, tc.want, raw); !bytes.Equal(got, body) {
			t.Errorf("Accept-Encoding %q: decoded body differs", tc.ae)
		}
		if resp.Header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("Accept-Encoding %q: Vary %q", tc.ae, resp.Header.Get("Vary"))
		}
	}
	// Two field lines are one list.
	req, _ := http.NewRequest(http.MethodGet, f.url+"/n", nil)
	req.Header["Accept-Encoding"] = []string{"gzip;q=0.5", "br;q=0.7"}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := resp.Header.Get("Content-Encoding"); got != "br" {
		t.Errorf("two Accept-Encoding lines: Content-Encoding %q, want br", got)
	}
}

// TestCompressNot: answers levee must send as they are.
func TestCompressNot(t *testing.T) {
	big := jsonAnswer(8 << 10)
	small := jsonAnswer(1000)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		b := big
		switch r.URL.Path {
		case "/small":
			b = small
		case "/small-chunked": // unknown length: compressed whatever its size
			h.Set("Content-Type", "text/plain")
			w.Write(small)
			w.(http.Flusher).Flush()
			return
		case "/encoded":
			h.Set("Content-Encoding", "gzip")
		case "/encoded-identity":
			h.Set("Content-Encoding", "identity")
		case "/no-transform":
			h.Set("Cache-Control", "public, No-Transform, max-age=60")
		case "/range":
			h.Set("Content-Range", fmt.Sprintf("bytes 0-%d/%d", len(b)-1, 3*len(b)))
			h.Set("Content-Length", strconv.Itoa(len(b)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(b)
			return
		case "/not-modified":
			w.WriteHeader(http.StatusNotModified)
			return
		case "/no-content":
			w.WriteHeader(http.StatusNoContent)
			return
		case "/png":
			h.Set("Content-Type", "image/png")
		case "/untyped":
			h["Content-Type"] = nil
		case "/textual":
			h.Set("Content-Type", "TEXT/CSV; charset=utf-8")
		case "/vary":
			h.Set("Vary", "Origin, accept-encoding")
		}
		h.Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	})
	f := newCompressFront(t, up, defaultCompression())
	for _, tc := range []struct {
		method, path string
		ce           string // the Content-Encoding the client gets
		vary         string
		body         []byte
		status       int
	}{
		{"GET", "/big", "zstd", "Accept-Encoding", big, 200},
		{"GET", "/small", "", "", small, 200},
		{"GET", "/small-chunked", "zstd", "Accept-Encoding", small, 200},
		{"GET", "/encoded", "gzip", "", big, 200},
		{"GET", "/encoded-identity", "identity", "", big, 200},
		{"GET", "/no-transform", "", "", big, 200},
		{"GET", "/range", "", "", big, 206},
		{"GET", "/not-modified", "", "", nil, 304},
		{"GET", "/no-content", "", "", nil, 204},
		{"GET", "/png", "", "", big, 200},
		{"GET", "/untyped", "", "", big, 200},
		{"GET", "/textual", "zstd", "Accept-Encoding", big, 200},
		{"GET", "/vary", "zstd", "Origin, accept-encoding", big, 200},
		{"HEAD", "/big", "", "", nil, 200},
	} {
		resp, raw := f.get(t, tc.method, tc.path, "gzip, br, zstd")
		ce := resp.Header.Get("Content-Encoding")
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
		if ce != tc.ce {
			t.Errorf("%s %s: Content-Encoding %q, want %q", tc.method, tc.path, ce, tc.ce)
		}
		got := raw
		if tc.ce == "zstd" {
			got = decode(t, ce, raw)
		}
		if !bytes.Equal(got, tc.body) {
			t.Errorf("%s %s: body of %d bytes, want %d", tc.method, tc.path, len(got), len(tc.body))
		}
		if v := strings.Join(resp.Header.Values("Vary"), ", "); v != tc.vary {
			t.Errorf("%s %s: Vary %q, want %q", tc.method, tc.path, v, tc.vary)
		}
		if tc.method == "HEAD" && resp.Header.Get("Content-Length") != strconv.Itoa(len(big)) {
			t.Errorf("HEAD: Content-Length %q, want the upstream's %d", resp.Header.Get("Content-Length"), len(big))
		}
	}
}

// TestCompressNotRefusals: levee's own refusals are never compressed, on
// a route that would compress anything.
func TestCompressNotRefusals(t *testing.T) {
	c := defaultCompression()
	c.MinBytes = 0
	f := newCompressFront(t, nil, c)
	resp, raw := f.get(t, http.MethodGet, "/x", "gzip")
	if resp.StatusCode != http.StatusBadGateway && resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want a refusal (502/503): %s", resp.StatusCode, raw)
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" || !bytes.Contains(raw, []byte(`"reason"`)) {
		t.Errorf("refusal: Content-Encoding %q, body %q; want plain JSON", ce, raw)
	}
}

// TestCompressStreamed: an NDJSON answer that the upstream flushes line
// by line, pausing until the test lets it go on, reaches the client coded
// chunk by chunk: the client decodes each line while the upstream is
// still holding the next.
func TestCompressStreamed(t *testing.T) {
	const lines = 5
	mkUp := func(next <-chan struct{}, finished chan<- struct{}) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(finished)
			w.Header().Set("Content-Type", "application/x-ndjson")
			for i := range lines {
				if i > 0 {
					select {
					case <-next:
					case <-time.After(10 * time.Second):
						return
					}
				}
				fmt.Fprintf(w, "{\"row\":%d,\"pad\":%q}\n", i, strings.Repeat("p", 100))
				w.(http.Flusher).Flush()
			}
		})
	}
	for _, coding := range []string{"gzip", "br", "zstd"} {
		t.Run(coding, func(t *testing.T) {
			next, finished := make(chan struct{}), make(chan struct{})
			f := newCompressFront(t, mkUp(next, finished), defaultCompression())
			req, _ := http.NewRequest(http.MethodGet, f.url+"/rows", nil)
			req.Header.Set("Accept-Encoding", coding)
			resp, err := f.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ce := resp.Header.Get("Content-Encoding"); ce != coding {
				t.Fatalf("Content-Encoding %q", ce)
			}
			var dec io.Reader
			switch coding {
			case "gzip":
				zr, err := gzip.NewReader(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				dec = zr
			case "br":
				dec = brotli.NewReader(resp.Body)
			case "zstd":
				zr, err := zstd.NewReader(resp.Body, zstd.WithDecoderConcurrency(1))
				if err != nil {
					t.Fatal(err)
				}
				defer zr.Close()
				dec = zr
			}
			br := bufio.NewReader(dec)
			for i := range lines {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("line %d: %v", i, err)
				}
				if want := fmt.Sprintf("{\"row\":%d,", i); !strings.HasPrefix(line, want) {
					t.Fatalf("line %d: %q", i, line)
				}
				if i < lines-1 {
					select {
					case <-finished:
						t.Fatalf("line %d decoded only after the upstream finished", i)
					default:
					}
					next <- struct{}{} // the upstream writes the next line only now
				}
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Fatalf("after the last line: %q, %v", rest, err)
			}
			<-finished
		})
	}
}

// TestParseQValue checks the weight's grammar directly, and a control
// byte that no HTTP client would send.
func TestParseQValue(t *testing.T) {
	if _, ok := parseAcceptEncoding([]string{"g\x01zip"}); ok {
		t.Error("a control byte in a coding accepted")
	}
	for s, want := range map[string]int16{"0": 0, "1": 1000, "0.5": 500, "0.05": 50, "0.001": 1, "1.000": 1000, "0.": 0, "1.": 1000} {
		if got, ok := parseQValue(s); !ok || got != want {
			t.Errorf("parseQValue(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "2", "1.1", "0.0001", "-0", "0,5", ".5", "1.0001", "01"} {
		if _, ok := parseQValue(s); ok {
			t.Errorf("parseQValue(%q) accepted", s)
		}
	}
}

// FuzzAcceptEncoding: the parser never panics, allocates nothing and
// negotiate picks only a coding offered and acceptable.
func FuzzAcceptEncoding(f *testing.F) {
	for _, s := range []string{"gzip", "br;q=0.5, gzip;q=0.4", "*;q=0", "identity;q=0, *", "zstd;q=1.000,,", "gzip;q=", "a;b;c", strings.Repeat("gzip,", 40)} {
		f.Add(s)
	}
	offered := []Encoding{EncodingZstd, EncodingBrotli, EncodingGzip}
	f.Fuzz(func(t *testing.T, s string) {
		lines := []string{s}
		a, ok := parseAcceptEncoding(lines)
		e := negotiate(lines, offered)
		if e == EncodingNone {
			return
		}
		if !ok {
			t.Fatalf("%q: malformed, yet %s chosen", s, e)
		}
		q := a.q[e]
		if q < 0 {
			q = a.star
		}
		if q <= 0 {
			t.Fatalf("%q: %s chosen with q %d", s, e, q)
		}
		for _, o := range offered {
			oq := a.q[o]
			if oq < 0 {
				oq = a.star
			}
			if oq > q {
				t.Fatalf("%q: %s chosen at q %d over %s at %d", s, e, q, o, oq)
			}
		}
		if n := testing.AllocsPerRun(1, func() { negotiate(lines, offered) }); n != 0 {
			t.Fatalf("%q: %v allocations", s, n)
		}
	})
}
