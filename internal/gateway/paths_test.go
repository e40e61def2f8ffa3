package gateway

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/client"
)

// targetUpstream is an HTTP/1.1 upstream on a real listener that records the
// request-target bytes (and Host) of every request it receives, exactly as
// they arrived, and answers 200 with the target as its body. It parses
// only what it needs (request line, Host, Content-Length) and keeps
// connections alive, as levee's pools expect.
type targetUpstream struct {
	ln net.Listener
	wg sync.WaitGroup

	mu      sync.Mutex
	targets []string
	hosts   []string
	conns   map[net.Conn]struct{}
	closed  bool
}

func newTargetUpstream(t *testing.T) *targetUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &targetUpstream{ln: ln, conns: map[net.Conn]struct{}{}}
	u.wg.Add(1)
	go u.accept()
	t.Cleanup(u.close)
	return u
}

func (u *targetUpstream) addr() string { return u.ln.Addr().String() }

func (u *targetUpstream) accept() {
	defer u.wg.Done()
	for {
		c, err := u.ln.Accept()
		if err != nil {
			return
		}
		u.mu.Lock()
		if u.closed {
			u.mu.Unlock()
			c.Close()
			return
		}
		u.conns[c] = struct{}{}
		u.wg.Add(1)
		u.mu.Unlock()
		go u.serve(c)
	}
}

// serve answers requests on c until it closes or stays idle for 30 s;
// each head is bounded to 64 KiB, each body to 1 MiB.
func (u *targetUpstream) serve(c net.Conn) {
	defer u.wg.Done()
	defer func() {
		u.mu.Lock()
		delete(u.conns, c)
		u.mu.Unlock()
		c.Close()
	}()
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		fields := strings.Split(strings.TrimRight(string(line), "\r\n"), " ")
		if len(fields) != 3 {
			return
		}
		target, host, length := fields[1], "", int64(0)
		for n := 0; ; n++ {
			h, err := br.ReadSlice('\n')
			if err != nil || n > 200 {
				return
			}
			s := strings.TrimRight(string(h), "\r\n")
			if s == "" {
				break
			}
			k, v, _ := strings.Cut(s, ":")
			v = strings.TrimSpace(v)
			switch strings.ToLower(k) {
			case "host":
				host = v
			case "content-length":
				if length, err = strconv.ParseInt(v, 10, 64); err != nil || length < 0 || length > 1<<20 {
					return
				}
			}
		}
		if _, err := io.CopyN(io.Discard, br, length); err != nil {
			return
		}
		u.mu.Lock()
		u.targets = append(u.targets, target)
		u.hosts = append(u.hosts, host)
		u.mu.Unlock()
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Seen-Host: %s\r\nContent-Length: %d\r\n\r\n%s", host, len(target), target); err != nil {
			return
		}
	}
}

func (u *targetUpstream) close() {
	u.mu.Lock()
	u.closed = true
	for c := range u.conns {
		c.Close()
	}
	u.mu.Unlock()
	u.ln.Close()
	u.wg.Wait()
}

// seen returns every request-target the upstream received so far.
func (u *targetUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.targets...)
}

// laxView is the path a lax backend could make of a request-target it
// receives: every escape decoded (once), backslashes read as slashes,
// ';' parameters dropped, dot segments resolved, slashes merged. If levee
// is right, no keyless request's laxView is under the keyed prefix.
func laxView(target string) string {
	p, _, _ := strings.Cut(target, "?")
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' && i+2 < len(p) {
			if v, err := strconv.ParseUint(p[i+1:i+3], 16, 8); err == nil {
				c = byte(v)
				i += 2
			}
		}
		if c == '\\' {
			c = '/'
		}
		b.WriteByte(c)
	}
	segs := strings.Split(b.String(), "/")
	for i, s := range segs {
		if j := strings.IndexByte(s, ';'); j >= 0 {
			segs[i] = s[:j]
		}
	}
	return path.Clean("/" + strings.Join(segs, "/"))
}

// pathCase is one raw request-target and what levee must make of it: the
// target the upstream receives (fwd, with status 200), or a refusal.
type pathCase struct {
	target string
	status int
	reason string // for a refusal; "" for the head parser's plain 400
	fwd    string
}

func fwd(target, forwarded string) pathCase {
	return pathCase{target: target, status: 200, fwd: forwarded}
}
func badPath(target string) pathCase {
	return pathCase{target: target, status: 400, reason: "bad_path"}
}
func noKey(target string) pathCase {
	return pathCase{target: target, status: 401, reason: "unauthenticated"}
}
func badHead(target string) pathCase { return pathCase{target: target, status: 400} }

// rejectCases run against escaped_slashes: reject (the default).
var rejectCases = []pathCase{
	// Plain, and the reported bypasses.
	fwd("/users/x", "/users/x"),
	noKey("/users/admin/x"),
	noKey("/users/x/../admin/x"),
	noKey("/users//admin/x"),
	noKey("//users/admin/x"),
	noKey("/users/./admin/x"),
	noKey("/users/x/../../users/admin/x"),
	noKey("/users/x/../../../../../users/admin/x"),
	noKey("/users/x/../admin/x?q=1"),
	fwd("/users/admin/../x", "/users/x"),
	fwd("/users/x/.", "/users/x/"),
	fwd("/users/x/..", "/users/"),
	fwd("/users/admin/..", "/users/"),
	fwd("/users/x/.../admin", "/users/x/.../admin"),
	// Encoded dots, and encoded unreserved letters.
	noKey("/users/x/%2e%2e/admin/x"),
	noKey("/users/x/%2E%2E/admin/x"),
	noKey("/users/x/.%2e/admin/x"),
	noKey("/users/x/%2E./admin/x"),
	noKey("/users/%2e/admin/x"),
	noKey("/users/x/%2e%2e/%2e%2e/users/admin/x"),
	fwd("/users/%2e%2e/admin/x", "/admin/x"),
	fwd("/users/x/%2e%2e%2e/admin", "/users/x/.../admin"),
	noKey("/users/%61dmin/x"),
	noKey("/users/%61%64%6D%69%6E/x"),
	noKey("/%75sers/admin/x"),
	fwd("/users/%7eadmin", "/users/~admin"),
	// Encoded slashes and backslashes, both cases.
	badPath("/users%2fadmin/x"),
	badPath("/users%2Fadmin/x"),
	badPath("/users/x%2f..%2fadmin/x"),
	badPath("/users/x%2F..%2Fadmin/x"),
	badPath("/users/x/%2e%2e%2fadmin/x"),
	badPath("/users%5cadmin/x"),
	badPath("/users%5Cadmin/x"),
	badPath("/users/x/%5c../admin/x"),
	badPath("/users/admin%2Fx"),
	// Double encoding: decoded once, never twice.
	fwd("/users/%252e%252e/admin/x", "/users/%252e%252e/admin/x"),
	fwd("/users/x/%252E%252E/admin/x", "/users/x/%252E%252E/admin/x"),
	fwd("/users/%252fadmin/x", "/users/%252fadmin/x"),
	fwd("/users/%25252e", "/users/%25252e"),
	// Backslashes, raw.
	badPath(`/users\admin/x`),
	badPath(`/users/x\..\admin/x`),
	// ';' path parameters.
	badPath("/users/..;/admin/x"),
	badPath("/users/x/..;/admin/x"),
	badPath("/users/x/..;jsessionid=1/admin/x"),
	badPath("/users/.;/admin/x"),
	badPath("/users/x/%2e%2e%3b/admin/x"),
	badPath("/users/x/%2E%2e;/admin/x"),
	badPath("/users;x/admin/x"),
	badPath("/users/;/admin/x"),
	badPath("/users/admin;x/x"),
	badPath("/users/admin%3bx/x"),
	fwd("/users/x;v=1", "/users/x;v=1"),
	fwd("/users/x;v=1/y", "/users/x;v=1/y"),
	// Case: paths are case-sensitive.
	fwd("/USERS/ADMIN/x", "/USERS/ADMIN/x"),
	fwd("/Users/admin/x", "/Users/admin/x"),
	fwd("/users/ADMIN/x", "/users/ADMIN/x"),
	// NUL, invalid escapes.
	badPath("/users/x%00"),
	badPath("/users/x/..%00/admin/x"),
	badHead("/users/x\x00/admin"),
	badHead("/users/%G1"),
	badHead("/users/x%4"),
	badHead("/users/x%"),
	// Overlong and invalid UTF-8.
	badPath("/users/%C0%AE%C0%AE/admin/x"),
	badPath("/users/x/%C0%AE%C0%AE/admin/x"),
	badPath("/users/x/%E0%80%AE%E0%80%AE/admin/x"),
	badPath("/users/%C0%AF..%C0%AFadmin/x"),
	badPath("/users/x/%c0%2e"),
	badPath("/users/%ED%A0%80"),
	fwd("/users/caf%c3%a9", "/users/caf%C3%A9"),
	fwd("/users/\xc3\xa9", "/users/%C3%A9"),
	fwd("/users/x%20y", "/users/x%20y"),
	// Fullwidth and small forms of '.', '/', '\', raw and encoded.
	badPath("/users/x/%EF%BC%8E%EF%BC%8E/admin/x"),
	badPath("/users/x%EF%BC%8F..%EF%BC%8Fadmin/x"),
	badPath("/users%ef%bc%bcadmin/x"),
	badPath("/users/x/\xef\xbc\x8e\xef\xbc\x8e/admin/x"),
	badPath("/users/x/%EF%B9%92%EF%B9%92/admin/x"),
	// Absolute-form: origin form upstream, the authority as Host.
	fwd("http://h.example/users/x", "/users/x"),
	noKey("http://h.example/users/x/../admin/x"),
	noKey("http://h.example/users//admin/x"),
	fwd("HTTP://h.example/users/%2e%2e/admin/x", "/admin/x"),
	fwd("http://h.example", "/"),
	fwd("http://h.example?a=b", "/?a=b"),
	badPath("http://user@h.example/users/admin/x"),
	// '?' and '#': the query is forwarded as received.
	fwd("/users/x?a=../admin/x", "/users/x?a=../admin/x"),
	fwd("/users/x?%2e%2e/%2F", "/users/x?%2e%2e/%2F"),
	fwd("/users/./x?a", "/users/x?a"),
	badPath("/users/x#frag"),
	noKey("/users/x%23/../admin/x"),
	// Targets that are not origin-form.
	badPath("*"),
	badHead("users/admin/x"),
	// raw_path route: routed on the normal form, forwarded as received.
	fwd("/pkgs/@scope%2fname", "/pkgs/@scope%2fname"),
	fwd("/pkgs/a/../b", "/pkgs/a/../b"),
	noKey("/pkgs/../users/admin/x"),
	noKey("/pkgs/%2e%2e/users/admin/x"),
	badPath("/pkgs/a%2F..%2F..%2Fusers/admin/x"),
	badPath("/pkgs/%2e%2e%2Fusers/admin/x"),
}

// keepCases and decodeCases run against the other escaped_slashes modes.
var keepCases = []pathCase{
	fwd("/users/a%2fb", "/users/a%2Fb"),
	fwd("/users/a%5Cb", "/users/a%5Cb"),
	noKey("/users%2Fadmin/x"),
	badPath("/users/x%2F..%2Fadmin/x"),
	badPath("/users/x/%2e%2e%2fadmin/x"),
	noKey("/users/x/../admin/x"),
}

var decodeCases = []pathCase{
	fwd("/users/a%2fb", "/users/a/b"),
	fwd("/users/a%5Cb", "/users/a/b"),
	noKey("/users%2Fadmin/x"),
	noKey("/users/x%2F..%2Fadmin/x"),
	noKey("/users/x/%2e%2e%5cadmin/x"),
	badPath("/users/x%2F..;%2Fadmin/x"),
}

func pathsConfig(upstream, mode string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
server: {paths: {escaped_slashes: %s}}
upstreams:
  data: {endpoints: [{address: %s}]}
routes:
  - {name: users, match: {path_prefix: /users/}, upstream: data}
  - {name: admin, match: {path_prefix: /users/admin/}, upstream: data, auth: api_key}
  - {name: pkgs, match: {path_prefix: /pkgs/, raw_path: true}, upstream: data}
  - {name: all, match: {path_prefix: /}, upstream: data}
apps:
  - {id: good, api_key_sha256: [%s], grants: [admin]}
`, mode, upstream, keyHash(goodKey))
}

// sendRaw writes one request with target as raw bytes on a new connection
// and returns the response and its body.
func sendRaw(t *testing.T, addr, method, target string, hdr ...string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n", method, target)
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	body := ""
	if method == http.MethodPost {
		body = "x"
		b.WriteString("Content-Length: 1\r\n")
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %q: %v", method, target, err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %q: body: %v", method, target, err)
	}
	return resp, string(raw)
}

// TestPathNormalisationRawTargets sends raw request-targets (dot
// segments, encoded dots and slashes, double encoding, backslashes, ';'
// parameters, case, NUL, overlong UTF-8, fullwidth characters,
// absolute-form, '?' and '#') without a key to a public route /users/ and
// a keyed route /users/admin/ on one upstream: none may reach a path a
// lax backend would read as under /users/admin/, each refusal is 400
// bad_path or 401, and the upstream gets exactly the normal form. GET
// takes levee's HTTP/1.1 fast path and POST (with a body) net/http's
// transport; both must forward the same target.
func TestPathNormalisationRawTargets(t *testing.T) {
	if len(rejectCases) < 60 {
		t.Fatalf("only %d raw targets", len(rejectCases))
	}
	for _, mode := range []struct {
		name  string
		cases []pathCase
	}{{"reject", rejectCases}, {"keep", keepCases}, {"decode", decodeCases}} {
		t.Run(mode.name, func(t *testing.T) {
			up := newTargetUpstream(t)
			h := start(t, pathsConfig(up.addr(), mode.name))
			addr := strings.TrimPrefix(h.base, "http://")
			for _, c := range mode.cases {
				for _, method := range []string{http.MethodGet, http.MethodPost} {
					before := len(up.seen())
					resp, body := sendRaw(t, addr, method, c.target)
					if resp.StatusCode != c.status {
						t.Errorf("%s %q: status %d (%q), want %d", method, c.target, resp.StatusCode, body, c.status)
						continue
					}
					if c.status == 200 {
						if body != c.fwd {
							t.Errorf("%s %q: upstream received %q, want %q", method, c.target, body, c.fwd)
						}
						if strings.HasPrefix(strings.ToLower(c.target), "http://") && resp.Header.Get("X-Seen-Host") != "h.example" {
							t.Errorf("%s %q: upstream Host %q, want the target's authority", method, c.target, resp.Header.Get("X-Seen-Host"))
						}
						continue
					}
					if n := len(up.seen()); n != before {
						t.Errorf("%s %q: refused with %d, but the upstream got a request", method, c.target, c.status)
					}
					if c.reason != "" {
						var r refusal
						if err := json.Unmarshal([]byte(body), &r); err != nil || r.Reason != c.reason {
							t.Errorf("%s %q: body %q, want reason %s", method, c.target, body, c.reason)
						}
					}
				}
			}
			for _, got := range up.seen() {
				if v := laxView(got); v == "/users/admin" || strings.HasPrefix(v, "/users/admin/") {
					t.Errorf("a keyless request reached the upstream as %q (read as %q)", got, v)
				}
			}

			// With the key, the same bypass strings reach the keyed route,
			// normalised: the table above refuses them for want of a key,
			// not by accident.
			for _, target := range []string{"/users/x/../admin/x", "/users//admin/x", "http://h.example/users/%2e/admin/x"} {
				resp, body := sendRaw(t, addr, http.MethodGet, target, "X-Api-Key", goodKey)
				if resp.StatusCode != 200 || body != "/users/admin/x" {
					t.Errorf("%q with a key: %d, upstream received %q; want 200 and /users/admin/x", target, resp.StatusCode, body)
				}
			}
		})
	}
}

// TestSignedPathAsSent: an HMAC signature covers the path as the client
// sent it (docs/authentication.md), while the upstream gets its normal
// form; a signature over one path does not admit another that normalises
// to it.
func TestSignedPathAsSent(t *testing.T) {
	up := newTargetUpstream(t)
	h := start(t, consumersConfig(up.addr()))
	secret := sha256.Sum256([]byte(goodKey))
	keyID := keyHash(goodKey)[:12]
	sign := func(path string) *http.Request {
		req, err := http.NewRequest(http.MethodGet, h.base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Sign(req, keyID, secret[:], nil, time.Now()); err != nil {
			t.Fatal(err)
		}
		return req
	}
	req := sign("/signed/a/./%7eb/../c%c3%a9")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "/signed/a/c%C3%A9" {
		t.Errorf("signed non-normal path: %d, upstream received %q; want 200 and /signed/a/c%%C3%%A9", resp.StatusCode, body)
	}

	req = sign("/signed/x")
	req.URL.Path, req.URL.RawPath = "/signed/y/../x", ""
	resp, err = h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	expectConsumerRefusal(t, "signature over another path", resp, 401, "unauthenticated", "bad_signature")
}
