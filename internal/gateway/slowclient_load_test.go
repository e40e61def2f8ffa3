//go:build !race

package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestSlowClientsBesideNGINX is issue 22's slow-client attack, on levee
// and on NGINX 1.22 in the same run, each in front of the same backend
// (answering in 2 ms) with 32 upstream connections at most (levee:
// max_concurrency 32; NGINX: max_conns=32), a 1 s body timeout and a 1 s
// send timeout on both (client_body_timeout, send_timeout). For each
// attack kind, 40 connections from 127.0.0.1 attack while a normal client
// from 127.0.0.2 sends GETs one after the other for slowRun; the normal
// client's success ratio (200 within 2 s) is printed for both, and levee's
// must be at least 97 %. The backend records how long each request took
// it: none may be held past the timeouts (plus a margin).
//
// Attack kinds: stalled (a Content-Length 1000 body of which 3 bytes come,
// then nothing; again after each 408), trickled (the same body, a byte
// every 500 ms, within the timeout), slow_h1 and slow_tls (a 4 KiB receive
// buffer and a GET never read; a new connection every 1.5 s),
// h2_zero_window (HTTP/2 over TLS with SETTINGS_INITIAL_WINDOW_SIZE 0 and
// a GET; again every 1.5 s): the GET is of the backend's usual 64-byte
// answer (the attack), which levee now holds whole before writing
// it, its slot already released. The _256k kinds ask for a 256 KiB answer
// instead: over the 32 KiB copy buffer but within server.answer_buffer
// (1 MiB by default), so levee reads it whole too before writing, and
// releases the slot (as NGINX's proxy_buffering frees its upstream
// connection); before answer_buffer, levee's normal client got 93.5 %
// there. An answer over answer_buffer streams with its slot held until
// send_timeout cuts the client (docs/admission.md).
func TestSlowClientsBesideNGINX(t *testing.T) {
	be := newSlowBackend(t)
	certFile, keyFile, _ := selfSigned(t)
	levee := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false, level: error}
profiles: {enabled: false}
server: {body_timeout: 1s, send_timeout: 1s}
upstreams:
  b:
    endpoints: [{address: %s}]
    limits: {max_concurrency: 32}
routes:
  - {name: all, match: {path_prefix: /}, upstream: b}
`, hostPort(be.srv))
	leveePlain := start(t, levee)
	leveeTLS := start(t, levee+fmt.Sprintf("tls: {cert_file: %s, key_file: %s}\n", certFile, keyFile))
	ngx := func(tls bool) *testsvc.NGINX {
		o := testsvc.NGINXOptions{
			HTTP: fmt.Sprintf(`upstream b { server %s max_conns=32; keepalive 32; }
  client_body_timeout 1s;
  send_timeout 1s;`, hostPort(be.srv)),
			Server: `location / { proxy_pass http://b; proxy_http_version 1.1; proxy_set_header Connection ""; }`,
		}
		if tls {
			o.TLSCert, o.TLSKey = certFile, keyFile
		}
		return testsvc.StartNGINX(t, o)
	}
	ngxPlain, ngxTLS := ngx(false), ngx(true)

	kinds := []struct {
		name   string
		tls    bool
		attack func(ctx context.Context, addr string)
		// bounded: levee's 97 % is asserted (else only printed)
		bounded bool
	}{
		{"stalled", false, attackStalled, true},
		{"trickled", false, attackTrickled, true},
		{"slow_h1", false, func(ctx context.Context, addr string) { attackSlowReader(ctx, addr, false, "/small") }, true},
		{"slow_tls", true, func(ctx context.Context, addr string) { attackSlowReader(ctx, addr, true, "/small") }, true},
		{"h2_zero_window", true, func(ctx context.Context, addr string) { attackZeroWindow(ctx, addr, "/small") }, true},
		{"slow_h1_256k", false, func(ctx context.Context, addr string) { attackSlowReader(ctx, addr, false, "/big") }, true},
		{"h2_zero_win_256k", true, func(ctx context.Context, addr string) { attackZeroWindow(ctx, addr, "/big") }, true},
	}
	var report strings.Builder
	for _, k := range kinds {
		targets := []struct {
			name, addr string
		}{{"levee", leveePlain.g.Addr().String()}, {"nginx", ngxPlain.Address}}
		if k.tls {
			targets[0].addr, targets[1].addr = leveeTLS.g.Addr().String(), ngxTLS.Address
		}
		var leveeRatio float64
		for _, tg := range targets {
			be.reset()
			ok, total, byStatus := runSlowAttack(t, tg.addr, k.tls, k.attack)
			maxHeld := be.maxHeld()
			ratio := float64(ok) / float64(max(total, 1))
			line := fmt.Sprintf("%-15s %-6s normal client %5.1f %% (%d/%d; %v), upstream requests %d, longest held %v",
				k.name, tg.name, 100*ratio, ok, total, byStatus, be.count.Load(), maxHeld.Round(time.Millisecond))
			t.Log(line)
			report.WriteString(line + "\n")
			if tg.name == "levee" {
				leveeRatio = ratio
				// 1 s timeouts; a cut upstream request ends when levee drops
				// its connection: well within 3 s.
				if maxHeld > 3*time.Second {
					t.Errorf("%s: levee held an upstream request %v", k.name, maxHeld)
				}
			}
		}
		if k.bounded && leveeRatio < 0.97 {
			t.Errorf("%s: levee's normal client got %.1f %%, want >= 97 %%", k.name, 100*leveeRatio)
		}
	}
	if f := leveePlain.endpointFailures() + leveeTLS.endpointFailures(); f != 0 {
		t.Errorf("endpoint failures %v, want 0: a slow client is not the endpoint's fault", f)
	}
	t.Logf("summary:\n%s", report.String())
}

// slowRun is how long the normal client runs per attack kind and target:
// 3 s (4 s before; the test's 14 runs are its whole time). At 2 s the old
// fault (answer_buffer: 0) scored 96.8 % against the 97 % line, caught
// only narrowly; at 3 s the starved kinds have half as long again to
// show it, while one failure still costs little of the 3 points the
// 97 % leaves (levee got 100.0 % in every kind at 4 s and at 2 s, also
// at load average 20). The attack has been under way over 3 s by the
// end: past the 1 s body and send timeouts and the slow kinds' 1.5 s
// reconnect, so the timeouts' cuts and the attackers' return both fall
// in the window.
const slowRun = 3 * time.Second

// runSlowAttack runs 40 attackers and, after a second for them to take
// hold, the normal client for slowRun; it returns the normal client's
// successes, requests and answers by status (0: an error or a timeout).
func runSlowAttack(t *testing.T, addr string, useTLS bool, attack func(ctx context.Context, addr string)) (ok, total int, byStatus map[int]int) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				attack(ctx, addr)
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	select { // the attack's pace, not a wait for a state
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 2 * time.Second}).DialContext,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}},
		MaxIdleConnsPerHost: 4,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	scheme := "http"
	if useTLS {
		scheme = "https"
	}
	byStatus = map[int]int{}
	for end := time.Now().Add(slowRun); time.Now().Before(end); {
		total++
		resp, err := client.Get(scheme + "://" + addr + "/small")
		if err != nil {
			byStatus[0]++
			continue
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == 200 {
			ok++
		}
		byStatus[resp.StatusCode]++
	}
	return ok, total, byStatus
}

// slowBackend answers /small with 64 bytes and /big with 256 KiB, after
// 2 ms, recording how long each request took it (body read and answer
// written included).
type slowBackend struct {
	srv   *httptest.Server
	count atomic.Int64
	held  atomic.Int64 // the longest, ns
}

func newSlowBackend(t *testing.T) *slowBackend {
	be := &slowBackend{}
	big := strings.Repeat("z", 256<<10)
	be.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(2 * time.Millisecond) // the backend's own work
		if strings.HasPrefix(r.URL.Path, "/big") {
			_, _ = io.WriteString(w, big)
		} else {
			_, _ = io.WriteString(w, strings.Repeat("y", 64))
		}
		be.count.Add(1)
		d := int64(time.Since(start))
		for {
			cur := be.held.Load()
			if d <= cur || be.held.CompareAndSwap(cur, d) {
				break
			}
		}
	}))
	t.Cleanup(be.srv.Close)
	return be
}

func (be *slowBackend) reset()                 { be.count.Store(0); be.held.Store(0) }
func (be *slowBackend) maxHeld() time.Duration { return time.Duration(be.held.Load()) }

// attackConn dials addr from 127.0.0.1, with a 4 KiB receive buffer when
// small is set, over TLS (ALPN proto) when proto is not "".
func attackConn(ctx context.Context, addr string, small bool, proto string) (net.Conn, error) {
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}
	if small {
		d.Control = smallRcvBuf
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil || proto == "" {
		return c, err
	}
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{proto}})
	tc.SetDeadline(time.Now().Add(2 * time.Second))
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	tc.SetDeadline(time.Time{})
	return tc, nil
}

// holdFor keeps the attack's connection for d, or until ctx ends.
func holdFor(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// attackStalled sends 3 bytes of a 1000-byte body and waits for the
// answer (levee's and NGINX's 408), at most 5 s.
func attackStalled(ctx context.Context, addr string) {
	c, err := attackConn(ctx, addr, false, "")
	if err != nil {
		holdFor(ctx, 100*time.Millisecond)
		return
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c, "POST /small HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\nabc")
	_, _ = io.Copy(io.Discard, c)
}

// attackTrickled sends a 1000-byte body a byte every 500 ms (it never
// ends within the run).
func attackTrickled(ctx context.Context, addr string) {
	c, err := attackConn(ctx, addr, false, "")
	if err != nil {
		holdFor(ctx, 100*time.Millisecond)
		return
	}
	defer c.Close()
	fmt.Fprint(c, "POST /small HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n")
	for range 1000 {
		holdFor(ctx, 500*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		if _, err := c.Write([]byte{'t'}); err != nil {
			return
		}
	}
}

// attackSlowReader asks for the 256 KiB answer with a small receive
// buffer and never reads; a new connection every 1.5 s.
func attackSlowReader(ctx context.Context, addr string, useTLS bool, path string) {
	proto := ""
	if useTLS {
		proto = "http/1.1"
	}
	c, err := attackConn(ctx, addr, true, proto)
	if err != nil {
		holdFor(ctx, 100*time.Millisecond)
		return
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", path)
	holdFor(ctx, 1500*time.Millisecond)
}

// attackZeroWindow opens an HTTP/2 connection over TLS that grants no
// stream window and asks for the 256 KiB answer; a new connection every
// 1.5 s. It reads frames (so the connection itself stays healthy) but
// never opens the stream's window.
func attackZeroWindow(ctx context.Context, addr string, path string) {
	c, err := attackConn(ctx, addr, false, "h2")
	if err != nil {
		holdFor(ctx, 100*time.Millisecond)
		return
	}
	defer c.Close()
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return
	}
	bw := bufio.NewWriter(c)
	fr := http2.NewFramer(bw, c)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	var hb strings.Builder
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":path", path}, {":authority", "a"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte(hb.String()), EndStream: true, EndHeaders: true})
	_ = bw.Flush()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				_ = fr.WriteSettingsAck()
				_ = bw.Flush()
			}
		}
	}()
	holdFor(ctx, 1500*time.Millisecond)
	c.Close()
	<-done
}
