//go:build !race

package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"
)

// Long connections across reloads (issue 28.4). Judged by wall-clock (a
// 100 MB download, deadlines on the drain), so a load test: !race, in
// LOAD_TEST_NAMES.

const longDownloadBytes = 100 << 20

// longConnUpstream serves a WebSocket echo at /ws (text frames up to 125
// bytes), an SSE stream at /sse (an event every 20 ms, "id: N" and "data:
// event N", until the client leaves) and longDownloadBytes of a seeded
// pseudo-random stream at /download.
func longConnUpstream(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ws":
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			k := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
			fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", base64.StdEncoding.EncodeToString(k[:]))
			brw.Flush()
			for {
				payload, err := readFrame(brw.Reader)
				if err != nil {
					return
				}
				if _, err := conn.Write(append([]byte{0x81, byte(len(payload))}, payload...)); err != nil {
					return
				}
			}
		case "/sse":
			w.Header().Set("Content-Type", "text/event-stream")
			rc := http.NewResponseController(w)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for n := 0; n < 100000; n++ { // bounded: 2,000 s of events
				if _, err := io.WriteString(w, sseEvent(n)); err != nil {
					return
				}
				if rc.Flush() != nil {
					return
				}
				select {
				case <-r.Context().Done():
					return
				case <-tick.C:
				}
			}
		case "/download":
			w.Header().Set("Content-Length", strconv.Itoa(longDownloadBytes))
			src := downloadStream()
			buf := make([]byte, 64<<10)
			for left := longDownloadBytes; left > 0; left -= len(buf) {
				b := buf[:min(len(buf), left)]
				fillFrom(src, b)
				if _, err := w.Write(b); err != nil {
					return
				}
			}
		default:
			io.WriteString(w, "ok\n")
		}
	}))
	t.Cleanup(up.Close)
	return up
}

func sseEvent(n int) string { return fmt.Sprintf("id: %d\ndata: event %d\n\n", n, n) }

func downloadStream() *rand.ChaCha8 { return rand.NewChaCha8([32]byte{'l', 'e', 'v', 'e', 'e'}) }

func fillFrom(src *rand.ChaCha8, b []byte) {
	_, _ = src.Read(b)
}

func longConnYAML(backend string, gen int, drain string) string {
	d := ""
	if drain != "" {
		d = "server: {drain_timeout: " + drain + "}\n"
	}
	return fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
%supstreams:
  b: {endpoints: [{address: %s}]}
routes:
  - name: b
    match: {path_prefix: /}
    upstream: b
    headers: {response: {set: {X-Generation: "%d"}}}
`, d, backend, gen)
}

// wsConn is a WebSocket through levee that sends numbered messages and
// checks each echo byte for byte.
type wsConn struct {
	conn net.Conn
	br   *bufio.Reader
	seq  uint64
}

func dialWS(t *testing.T, addr string) *wsConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := &wsConn{conn: conn, br: bufio.NewReader(conn)}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	wsHandshakeAndEcho(t, conn, c.br)
	return c
}

// echo sends one message and checks its echo; the error says what broke.
func (c *wsConn) echo() error {
	c.seq++
	msg := make([]byte, 8, 64)
	binary.BigEndian.PutUint64(msg, c.seq)
	msg = append(msg, " a long connection across reloads"...)
	c.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.conn.Write(maskedFrame(string(msg))); err != nil {
		return fmt.Errorf("message %d: %w", c.seq, err)
	}
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(c.br, hdr); err != nil {
		return fmt.Errorf("echo %d: %w", c.seq, err)
	}
	got := make([]byte, hdr[1])
	if _, err := io.ReadFull(c.br, got); err != nil {
		return fmt.Errorf("echo %d: %w", c.seq, err)
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo %d = %q, want %q", c.seq, got, msg)
	}
	return nil
}

// TestLongConnectionsAcrossReloads: a WebSocket echo, an SSE stream and a
// 100 MB download through levee continue byte-exact across 10 reloads, a
// data-API publish and an apps change; the replaced tables are kept while
// they run and released (collected) once they end, and levee's goroutines
// come back to the baseline. Nothing is closed by the drain (default 10m).
func TestLongConnectionsAcrossReloads(t *testing.T) {
	up := longConnUpstream(t)
	dbPath, _ := sqliteOrders(t)
	yaml := func(gen int) string {
		return longConnYAML(hostPort(up), gen, "") + fmt.Sprintf(`data_sources:
  sales: {driver: sqlite, path: %s, max_conns: 2}
`, dataQuote(dbPath))
	}
	h := start(t, yaml(0))
	addr := strings.TrimPrefix(h.base, "http://")
	if resp := h.get("/warm"); resp.StatusCode != 200 {
		t.Fatalf("warm: %d", resp.StatusCode)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	h.client.CloseIdleConnections()
	baseline := runtime.NumGoroutine()
	first := weak.Make(h.g.handler.Table())
	begin := time.Now()

	// The WebSocket: an echo every 20 ms until stop.
	ws := dialWS(t, addr)
	var wsEchoes atomic.Int64
	var wsErr error
	stopWS := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopWS:
				ws.conn.Close()
				return
			case <-tick.C:
			}
			if wsErr = ws.echo(); wsErr != nil {
				ws.conn.Close()
				return
			}
			wsEchoes.Add(1)
		}
	}()

	// The SSE stream: every event in order, byte for byte, until stop.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sseEvents atomic.Int64
	var sseErr error
	stopSSE := make(chan struct{})
	go func() {
		defer wg.Done()
		req, _ := http.NewRequestWithContext(ctx, "GET", h.base+"/sse", nil)
		resp, err := client.Do(req)
		if err != nil {
			sseErr = err
			return
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		for n := 0; ; n++ {
			want := sseEvent(n)
			got := make([]byte, len(want))
			if _, err := io.ReadFull(br, got); err != nil {
				sseErr = fmt.Errorf("event %d: %w", n, err)
				return
			}
			if string(got) != want {
				sseErr = fmt.Errorf("event %d = %q, want %q", n, got, want)
				return
			}
			sseEvents.Add(1)
			select {
			case <-stopSSE:
				return
			default:
			}
		}
	}()

	// The download: the first 16 MiB, then a pause until the changes are
	// done, then the rest; every byte checked against the stream.
	var dlBytes atomic.Int64
	var dlErr error
	resume := make(chan struct{})
	go func() {
		defer wg.Done()
		resp, err := client.Get(h.base + "/download")
		if err != nil {
			dlErr = err
			return
		}
		defer resp.Body.Close()
		want := downloadStream()
		got, exp := make([]byte, 256<<10), make([]byte, 256<<10)
		paused := false
		for dlBytes.Load() < longDownloadBytes {
			if !paused && dlBytes.Load() >= 16<<20 {
				paused = true
				<-resume
			}
			n, err := io.ReadFull(resp.Body, got[:min(len(got), int(longDownloadBytes-dlBytes.Load()))])
			fillFrom(want, exp[:n])
			if !bytes.Equal(got[:n], exp[:n]) {
				dlErr = fmt.Errorf("download: bytes differ within [%d, %d)", dlBytes.Load(), dlBytes.Load()+int64(n))
				return
			}
			dlBytes.Add(int64(n))
			if err != nil {
				dlErr = fmt.Errorf("download at %d bytes: %w", dlBytes.Load(), err)
				return
			}
		}
		if extra, _ := io.Copy(io.Discard, resp.Body); extra != 0 {
			dlErr = fmt.Errorf("download: %d bytes past the end", extra)
		}
	}()

	// progress waits until each stream has moved on past where it was:
	// the WebSocket by 3 echoes, the SSE stream by 3 events.
	progress := func(what string) {
		t.Helper()
		w0, s0 := wsEchoes.Load(), sseEvents.Load()
		deadline := time.Now().Add(5 * time.Second)
		for wsEchoes.Load() < w0+3 || sseEvents.Load() < s0+3 || dlBytes.Load() < 16<<20 {
			if time.Now().After(deadline) || wsErr != nil || sseErr != nil || dlErr != nil {
				t.Fatalf("after %s: websocket %d echoes (%v), sse %d events (%v), download %d bytes (%v)",
					what, wsEchoes.Load(), wsErr, sseEvents.Load(), sseErr, dlBytes.Load(), dlErr)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	progress("the start")
	for gen := 1; gen <= 10; gen++ {
		h.writeConfig(yaml(gen))
		if err := h.g.Reload(); err != nil {
			t.Fatalf("reload %d: %v", gen, err)
		}
		progress(fmt.Sprintf("reload %d", gen))
	}
	admin := func(method, path, body string, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, h.admin+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	admin("POST", "/api/v1/data-apis", `{"name": "orders-lc", `+versionDef("/v1/lc", 1)[1:], 201)
	admin("POST", "/api/v1/data-apis/orders-lc/publish", "", 200)
	progress("a data-API publish")
	admin("POST", "/api/v1/apps", `{"id": "long-conn-app"}`, 201)
	progress("an apps change")

	// The first table is still held: the three connections began on it.
	runtime.GC()
	if first.Value() == nil {
		t.Fatal("the first table was collected while connections that began on it still run")
	}
	close(resume)
	close(stopWS)
	close(stopSSE)
	wg.Wait()
	if wsErr != nil || sseErr != nil || dlErr != nil {
		t.Fatalf("websocket: %v; sse: %v; download: %v", wsErr, sseErr, dlErr)
	}
	if dlBytes.Load() != longDownloadBytes {
		t.Fatalf("download: %d bytes, want %d", dlBytes.Load(), longDownloadBytes)
	}
	cancel()
	client.CloseIdleConnections()
	h.client.CloseIdleConnections()
	held := time.Since(begin)

	// Released: the first table is collected and the goroutines are back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		g := runtime.NumGoroutine()
		if first.Value() == nil && g <= baseline+2 {
			t.Logf("held %s: websocket %d echoes, sse %d events, download %d bytes byte-exact across 10 reloads, a publish and an apps change; goroutines %d (baseline %d); the first table collected",
				held.Round(time.Millisecond), wsEchoes.Load(), sseEvents.Load(), dlBytes.Load(), g, baseline)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not released within 10 s: first table collected %v, goroutines %d (baseline %d)", first.Value() == nil, g, baseline)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := h.metric(`levee_drain_closed_total{reason="drain_timeout"}`); got != 0 {
		t.Fatalf("levee_drain_closed_total{drain_timeout} = %v, want 0 (default drain timeout 10m)", got)
	}
}

// TestLongConnectionsDrainTimeout: with server.drain_timeout 300ms, a
// WebSocket that began before a reload is closed by
// levee once 300 ms have passed since it, counted as drain_timeout and
// logged; a WebSocket opened after the reload keeps working.
func TestLongConnectionsDrainTimeout(t *testing.T) {
	up := longConnUpstream(t)
	h := start(t, longConnYAML(hostPort(up), 0, "300ms"))
	addr := strings.TrimPrefix(h.base, "http://")
	old := dialWS(t, addr)
	defer old.conn.Close()

	h.writeConfig(longConnYAML(hostPort(up), 1, "300ms"))
	if err := h.g.Reload(); err != nil {
		t.Fatal(err)
	}
	reloaded := time.Now()
	fresh := dialWS(t, addr)
	defer fresh.conn.Close()

	// The old WebSocket: echoes until levee closes it.
	var wsClosed time.Duration
	for wsClosed == 0 {
		if err := old.echo(); err != nil {
			wsClosed = time.Since(reloaded)
			break
		}
		if time.Since(reloaded) > 5*time.Second {
			t.Fatal("the WebSocket that began before the reload still runs 5 s after it (drain_timeout 300ms)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if wsClosed < 250*time.Millisecond { // the clock starts inside Reload, just before reloaded
		t.Fatalf("the WebSocket closed %s after the reload, before the 300ms drain timeout", wsClosed)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.metric(`levee_drain_closed_total{reason="drain_timeout"}`) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("levee_drain_closed_total{drain_timeout} = %v, want 1", h.metric(`levee_drain_closed_total{reason="drain_timeout"}`))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The fresh one, on the table now serving, is not drained.
	for i := 0; i < 5; i++ {
		if err := fresh.echo(); err != nil {
			t.Fatalf("the WebSocket opened after the reload: %v", err)
		}
	}
	if !strings.Contains(h.logs.String(), `"msg":"closed a long connection","kind":"upgrade","reason":"drain_timeout"`) {
		t.Errorf("no log line for the drained WebSocket:\n%s", h.logs.String())
	}
	t.Logf("the WebSocket begun before the reload closed %s after it (drain_timeout 300ms)", wsClosed.Round(time.Millisecond))
}

// TestLongStreamDrainTimeout: an SSE stream that began before a reload is
// cut at its next event once the drain timeout has passed (its body ends
// in an error, not a clean end), counted as drain_timeout.
func TestLongStreamDrainTimeout(t *testing.T) {
	up := longConnUpstream(t)
	h := start(t, longConnYAML(hostPort(up), 0, "300ms"))
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(h.base + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for n := 0; n < 3; n++ {
		want := sseEvent(n)
		got := make([]byte, len(want))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
			t.Fatalf("event %d: %q %v", n, got, err)
		}
	}
	h.writeConfig(longConnYAML(hostPort(up), 1, "300ms"))
	if err := h.g.Reload(); err != nil {
		t.Fatal(err)
	}
	reloaded := time.Now()
	_, err = io.Copy(io.Discard, io.LimitReader(br, 10<<20)) // bounded: 10 MiB, about 500 s of events
	cut := time.Since(reloaded)
	if err == nil {
		t.Fatal("the SSE stream ended cleanly; want it cut")
	}
	if cut < 250*time.Millisecond || cut > 5*time.Second { // the clock starts inside Reload
		t.Fatalf("the SSE stream was cut %s after the reload, want just after 300ms", cut)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.metric(`levee_drain_closed_total{reason="drain_timeout"}`) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("levee_drain_closed_total{drain_timeout} did not reach 1")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the SSE stream was cut %s after the reload (drain_timeout 300ms): %v", cut.Round(time.Millisecond), err)
}
