// Command soak is bench/soak.sh's engine: it starts a PostgreSQL, four HTTP
// backends fed to levee through a discovery file, a WebSocket echo backend
// and levee itself (the binary given), then for -d drives mixed traffic
// (HTTP through the file-discovered upstream, data-API reads from
// PostgreSQL, WebSocket echoes on long connections), reloads levee every
// -reload, rewrites the registry file every -churn, and restarts
// PostgreSQL once at half time. Every -every it prints levee's goroutines,
// open files, RSS and the errors of the interval; at the end a verdict
// against the bounds below. Exit status 0 when the verdict holds.
//
//	go run ./bench/soak -levee bin/levee -d 30m
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The verdict's bounds: growth from the warm sample (the end of the second
// interval) to the last one.
const (
	maxGoroutineGrowth = 50       // goroutines (plus 20% of the warm count)
	maxFDGrowth        = 32       // open files
	maxRSSGrowth       = 64 << 20 // bytes
	dbGrace            = 10 * time.Second
	// Data requests shed by admission (503 queue_full or queue_timeout) on a
	// busy machine: the defence working, not a fault, but bounded.
	maxShedRatio = 0.05
)

var (
	leveeBin = flag.String("levee", "bin/levee", "levee binary")
	dur      = flag.Duration("d", 30*time.Minute, "soak duration")
	every    = flag.Duration("every", time.Minute, "report interval")
	reloadEv = flag.Duration("reload", 10*time.Second, "reload interval")
	churnEv  = flag.Duration("churn", 5*time.Second, "registry rewrite interval")
	httpRate = flag.Int("http-rate", 100, "HTTP requests per second")
	dataRate = flag.Int("data-rate", 5, "data-API requests per second")
	wsConns  = flag.Int("ws", 8, "WebSocket connections held (each reconnects every 2 minutes)")
	pgBin    = flag.String("pg", "/usr/lib/postgresql/15/bin", "PostgreSQL's bin directory")
)

type counters struct {
	httpOK, httpErr, dataOK, dataErr, dataErrDB, dataShed, wsMsgs, wsErr, wsConns atomic.Int64
	// dataErrFast, Mid, Slow: data errors answered within 100 ms, within
	// 1 s, after 1 s.
	dataErrFast, dataErrMid, dataErrSlow atomic.Int64
	reloadOK, reloadErr, churns          atomic.Int64
}

var (
	c         counters
	firstErrs sync.Map // class -> first error text
	dbDownAt  atomic.Int64
	dbUpAt    atomic.Int64
)

func noteErr(class string, err error) { firstErrs.LoadOrStore(class, err.Error()) }

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "levee-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	pg, err := startPG(dir)
	if err != nil {
		return err
	}
	defer pg.stop()

	var backends []string
	for i := 0; i < 4; i++ {
		addr, closeFn := httpBackend(i)
		defer closeFn()
		backends = append(backends, addr)
	}
	wsAddr, wsClose := wsBackend()
	defer wsClose()

	listen := fmt.Sprintf("127.0.0.1:%d", freePort())
	admin := fmt.Sprintf("127.0.0.1:%d", freePort())
	registry := filepath.Join(dir, "registry.json")
	writeRegistry(registry, backends, 0)
	cfgPath := filepath.Join(dir, "levee.yaml")
	writeConfig := func(gen int) error {
		cfg := fmt.Sprintf(`listen: %s
admin: {listen: %s, token: none}
state_dir: %s/state
log: {level: warn, access: false}
data_sources:
  pg:
    driver: postgres
    dsn: "%s"
    max_conns: 4
    connect_timeout: 1s
    # one client is the only consumer: the per-consumer share (half) is lifted
    limits: {max_concurrency: 4, max_queue: 64, queue_timeout: 3s, max_per_consumer: 4}
upstreams:
  web:
    discovery: {file: %s, max_drop_fraction: 1}
  ws:
    endpoints: [{address: %s}]
routes:
  - name: web
    match: {path_prefix: /web/}
    upstream: web
    headers: {response: {set: {X-Soak-Generation: "%d"}}}
  - name: ws
    match: {path_prefix: /ws}
    upstream: ws
  - name: items
    match: {path_prefix: /data/items}
    data: {source: pg, table: items, columns: [id, name], order: [id], page: {keyset: [id], default: 20, max: 100}}
`, listen, admin, dir, pg.readerDSN, registry, wsAddr, gen)
		return os.WriteFile(cfgPath, []byte(cfg), 0o644)
	}
	if err := writeConfig(0); err != nil {
		return err
	}
	lv := exec.Command(*leveeBin, "run", "-config", cfgPath)
	lvLog, _ := os.Create(filepath.Join(dir, "levee.log"))
	lv.Stdout, lv.Stderr = lvLog, lvLog
	lv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := lv.Start(); err != nil {
		return err
	}
	lvDone := make(chan struct{})
	go func() { _ = lv.Wait(); close(lvDone) }()
	defer func() {
		_ = lv.Process.Signal(syscall.SIGTERM)
		select {
		case <-lvDone:
		case <-time.After(10 * time.Second):
			_ = lv.Process.Kill()
		}
		if b, err := os.ReadFile(filepath.Join(dir, "levee.log")); err == nil && len(b) > 0 {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) > 20 {
				lines = lines[len(lines)-20:]
			}
			fmt.Printf("levee log (last %d lines):\n  %s\n", len(lines), strings.Join(lines, "\n  "))
		}
	}()
	if err := waitReady("http://"+admin+"/readyz", 20*time.Second); err != nil {
		return err
	}
	fmt.Printf("soak: levee %s pid %d, listen %s, admin %s, postgres %d, %d HTTP backends (file discovery), ws %s\n",
		*leveeBin, lv.Process.Pid, listen, admin, pg.port, len(backends), wsAddr)
	fmt.Printf("soak: %s, HTTP %d/s, data %d/s, %d WebSockets, reload every %s, registry rewrite every %s, PostgreSQL restart at half time\n",
		*dur, *httpRate, *dataRate, *wsConns, *reloadEv, *churnEv)
	fmt.Printf("bounds: goroutines +%d (+20%%), open files +%d, RSS +%d MiB from the warm sample (end of minute 2) to the last; no HTTP or WebSocket error; data errors only while PostgreSQL is down (+%s), at most %.0f%% shed\n",
		maxGoroutineGrowth, maxFDGrowth, maxRSSGrowth>>20, dbGrace, 100*maxShedRatio)

	runCtx, cancel := context.WithTimeout(ctx, *dur)
	defer cancel()
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}}
	defer client.CloseIdleConnections()
	paced := func(rate int, f func()) {
		defer wg.Done()
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		sem := make(chan struct{}, 32) // at most 32 in flight per stream
		for {
			select {
			case <-runCtx.Done():
				for i := 0; i < cap(sem); i++ {
					sem <- struct{}{}
				}
				return
			case <-t.C:
			}
			select {
			case sem <- struct{}{}:
				go func() { defer func() { <-sem }(); f() }()
			default: // all 32 busy: this tick is skipped, not queued
			}
		}
	}
	wg.Add(2)
	go paced(*httpRate, func() {
		if err := get(runCtx, client, "http://"+listen+"/web/x", "backend"); err != nil {
			if runCtx.Err() == nil {
				c.httpErr.Add(1)
				noteErr("http", err)
			}
			return
		}
		c.httpOK.Add(1)
	})
	go paced(*dataRate, func() {
		start := time.Now()
		err := get(runCtx, client, "http://"+listen+"/data/items?limit=5", `"id"`)
		if err == nil {
			c.dataOK.Add(1)
			return
		}
		if runCtx.Err() != nil {
			return
		}
		down, up := dbDownAt.Load(), dbUpAt.Load()
		if down != 0 && start.UnixNano() >= down-int64(time.Second) && (up == 0 || start.UnixNano() <= up+int64(dbGrace)) {
			c.dataErrDB.Add(1)
			return
		}
		if strings.Contains(err.Error(), `"reason":"queue_full"`) || strings.Contains(err.Error(), `"reason":"queue_timeout"`) {
			c.dataShed.Add(1) // admission shedding on a busy machine: counted, bounded below
			noteErr("data shed", err)
			return
		}
		c.dataErr.Add(1)
		// How long the failed request took says where it failed: at
		// once (a broken or refused connection) or after the pool's
		// wait (connect_timeout + 100 ms: no connection in time).
		el := time.Since(start)
		switch {
		case el < 100*time.Millisecond:
			c.dataErrFast.Add(1)
		case el < time.Second:
			c.dataErrMid.Add(1)
		default:
			c.dataErrSlow.Add(1)
		}
		noteErr("data", err)
	})
	for i := 0; i < *wsConns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			wsClient(runCtx, listen, i)
		}(i)
	}
	// Reloads.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(*reloadEv)
		defer t.Stop()
		for gen := 1; ; gen++ {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			if err := writeConfig(gen); err != nil {
				c.reloadErr.Add(1)
				noteErr("reload", err)
				continue
			}
			req, _ := http.NewRequestWithContext(runCtx, "POST", "http://"+admin+"/api/v1/reload", nil)
			resp, err := client.Do(req)
			if err != nil {
				if runCtx.Err() == nil {
					c.reloadErr.Add(1)
					noteErr("reload", err)
				}
				continue
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode != 200 {
				c.reloadErr.Add(1)
				noteErr("reload", fmt.Errorf("status %d: %s", resp.StatusCode, b))
				continue
			}
			c.reloadOK.Add(1)
		}
	}()
	// Registry churn.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(*churnEv)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			writeRegistry(registry, backends, n)
			c.churns.Add(1)
		}
	}()
	// The database restart at half time.
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-runCtx.Done():
			return
		case <-time.After(*dur / 2):
		}
		dbDownAt.Store(time.Now().UnixNano())
		pg.stop()
		fmt.Printf("%s postgres stopped (fast shutdown)\n", time.Now().UTC().Format("15:04:05"))
		select {
		case <-runCtx.Done():
		case <-time.After(5 * time.Second):
		}
		if err := pg.start(); err != nil {
			fmt.Println("postgres restart failed:", err)
		}
		dbUpAt.Store(time.Now().UnixNano())
		fmt.Printf("%s postgres started again\n", time.Now().UTC().Format("15:04:05"))
	}()

	// Reports.
	type sample struct{ gor, fds, rss int64 }
	var samples []sample
	var last counters
	report := func(minute int) {
		s := sample{gor: goroutines(admin), fds: openFiles(lv.Process.Pid), rss: rss(lv.Process.Pid)}
		samples = append(samples, s)
		d := func(a *atomic.Int64, b *atomic.Int64) int64 { v := a.Load(); r := v - b.Load(); b.Store(v); return r }
		fmt.Printf("%s t=%3dm goroutines=%d open_files=%d rss_mib=%.1f | http ok=%d err=%d | data ok=%d err=%d shed=%d err_db_down=%d | ws msgs=%d err=%d conns=%d | reloads ok=%d err=%d | registry_writes=%d\n",
			time.Now().UTC().Format("15:04:05"), minute, s.gor, s.fds, float64(s.rss)/(1<<20),
			d(&c.httpOK, &last.httpOK), d(&c.httpErr, &last.httpErr),
			d(&c.dataOK, &last.dataOK), d(&c.dataErr, &last.dataErr), d(&c.dataShed, &last.dataShed), d(&c.dataErrDB, &last.dataErrDB),
			d(&c.wsMsgs, &last.wsMsgs), d(&c.wsErr, &last.wsErr), d(&c.wsConns, &last.wsConns),
			d(&c.reloadOK, &last.reloadOK), d(&c.reloadErr, &last.reloadErr), d(&c.churns, &last.churns))
	}
	report(0)
	tick := time.NewTicker(*every)
	minute := 0
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case <-lvDone:
			return errors.New("levee exited during the soak")
		case <-tick.C:
			minute++
			report(minute)
		}
	}
	tick.Stop()
	wg.Wait()
	client.CloseIdleConnections()
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	// Settle: traffic stopped, so the last sample sees no request in flight.
	time.Sleep(3 * time.Second)
	minute++
	report(minute)

	warm := samples[0]
	if len(samples) > 2 {
		warm = samples[2]
	}
	end := samples[len(samples)-1]
	var fails []string
	if end.gor > warm.gor+maxGoroutineGrowth+warm.gor/5 {
		fails = append(fails, fmt.Sprintf("goroutines %d -> %d", warm.gor, end.gor))
	}
	if end.fds > warm.fds+maxFDGrowth {
		fails = append(fails, fmt.Sprintf("open files %d -> %d", warm.fds, end.fds))
	}
	if end.rss > warm.rss+maxRSSGrowth {
		fails = append(fails, fmt.Sprintf("RSS %.1f -> %.1f MiB", float64(warm.rss)/(1<<20), float64(end.rss)/(1<<20)))
	}
	if n := c.httpErr.Load(); n > 0 {
		fails = append(fails, fmt.Sprintf("%d HTTP errors", n))
	}
	if n := c.wsErr.Load(); n > 0 {
		fails = append(fails, fmt.Sprintf("%d WebSocket errors", n))
	}
	if n := c.dataErr.Load(); n > 0 {
		fails = append(fails, fmt.Sprintf("%d data errors outside the database restart", n))
	}
	if shed, all := c.dataShed.Load(), c.dataOK.Load()+c.dataShed.Load()+c.dataErr.Load(); all > 0 && float64(shed) > maxShedRatio*float64(all) {
		fails = append(fails, fmt.Sprintf("%d of %d data requests shed (queue_full, queue_timeout), more than %.0f%%", shed, all, 100*maxShedRatio))
	}
	if n := c.reloadErr.Load(); n > 0 {
		fails = append(fails, fmt.Sprintf("%d reloads failed", n))
	}
	firstErrs.Range(func(k, v any) bool { fmt.Printf("first %s error: %s\n", k, v); return true })
	fmt.Printf("totals: http ok=%d err=%d | data ok=%d err=%d shed=%d err_db_down=%d | ws msgs=%d err=%d conns=%d | reloads ok=%d err=%d | registry_writes=%d\n",
		c.httpOK.Load(), c.httpErr.Load(), c.dataOK.Load(), c.dataErr.Load(), c.dataShed.Load(), c.dataErrDB.Load(),
		c.wsMsgs.Load(), c.wsErr.Load(), c.wsConns.Load(), c.reloadOK.Load(), c.reloadErr.Load(), c.churns.Load())
	fmt.Printf("data errors by time to answer: under 100 ms %d, 100 ms to 1 s %d, over 1 s %d\n", c.dataErrFast.Load(), c.dataErrMid.Load(), c.dataErrSlow.Load())
	if b, err := os.ReadFile(filepath.Join(pg.dir, "postgres.log")); err == nil {
		fmt.Printf("postgres: %d connections authorized for levee's reader (log_connections; a pool that keeps its 4 opens about 4 per PostgreSQL start)\n",
			bytes.Count(b, []byte("connection authorized: user=soak")))
	}
	fmt.Printf("growth from warm (t=2m) to end: goroutines %d -> %d, open files %d -> %d, RSS %.1f -> %.1f MiB\n",
		warm.gor, end.gor, warm.fds, end.fds, float64(warm.rss)/(1<<20), float64(end.rss)/(1<<20))
	if len(fails) > 0 {
		fmt.Println("VERDICT: FAIL:", strings.Join(fails, "; "))
		return errors.New("verdict failed")
	}
	fmt.Println("VERDICT: PASS")
	return nil
}

func get(ctx context.Context, client *http.Client, url, want string) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(want)) {
		return fmt.Errorf("%s: status %d: %.200s", url, resp.StatusCode, b)
	}
	return nil
}

func waitReady(url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within %s", url, d)
}

// writeRegistry writes 2 to 4 of the backends (which ones turns with n),
// atomically (rename), as the file source expects.
func writeRegistry(path string, backends []string, n int) {
	k := 2 + n%3
	var parts []string
	for i := 0; i < k; i++ {
		parts = append(parts, fmt.Sprintf(`{"address":%q,"weight":%d}`, backends[(n+i)%len(backends)], 1+(n+i)%3))
	}
	tmp := path + ".tmp"
	_ = os.WriteFile(tmp, []byte("["+strings.Join(parts, ",")+"]"), 0o644)
	_ = os.Rename(tmp, path)
}

func httpBackend(i int) (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend %d\n", i)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }
}

// --- WebSocket (RFC 6455), text frames up to 125 bytes ---

func acceptKey(k string) string {
	h := sha1.Sum([]byte(k + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// readFrame reads one frame of at most 125 bytes, unmasking it.
func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(h[1] & 0x7f)
	if n > 125 {
		return 0, nil, fmt.Errorf("frame length %d: not expected", n)
	}
	var mask [4]byte
	masked := h[1]&0x80 != 0
	if masked {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return 0, nil, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	if masked {
		for i := range p {
			p[i] ^= mask[i%4]
		}
	}
	return h[0] & 0x0f, p, nil
}

func wsBackend() (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "websocket only", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", acceptKey(r.Header.Get("Sec-WebSocket-Key")))
		_ = brw.Flush()
		for {
			op, p, err := readFrame(brw.Reader)
			if err != nil || op == 8 {
				return
			}
			if _, err := conn.Write(append([]byte{0x80 | op, byte(len(p))}, p...)); err != nil {
				return
			}
		}
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }
}

func maskedFrame(op byte, p []byte) []byte {
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	f := append([]byte{0x80 | op, 0x80 | byte(len(p))}, mask[:]...)
	for i, b := range p {
		f = append(f, b^mask[i%4])
	}
	return f
}

// wsClient holds a WebSocket through levee, sends a message every 200 ms
// and checks its echo, and reconnects every 2 minutes (a clean close).
func wsClient(ctx context.Context, listen string, id int) {
	for ctx.Err() == nil {
		if err := wsSession(ctx, listen, id, 2*time.Minute); err != nil && ctx.Err() == nil {
			c.wsErr.Add(1)
			noteErr("websocket", err)
			select { // a failed session is not retried in a tight loop
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func wsSession(ctx context.Context, listen string, id int, life time.Duration) error {
	conn, err := net.DialTimeout("tcp", listen, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	c.wsConns.Add(1)
	var kb [16]byte
	_, _ = rand.Read(kb[:])
	key := base64.StdEncoding.EncodeToString(kb[:])
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET /ws/%d HTTP/1.1\r\nHost: soak\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", id, key)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != acceptKey(key) {
		return fmt.Errorf("handshake: status %d", resp.StatusCode)
	}
	end := time.Now().Add(life)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for seq := uint64(0); ; seq++ {
		select {
		case <-ctx.Done():
			_, _ = conn.Write(maskedFrame(8, []byte{3, 232}))
			return nil
		case <-t.C:
		}
		if time.Now().After(end) {
			_, _ = conn.Write(maskedFrame(8, []byte{3, 232}))
			return nil
		}
		msg := make([]byte, 8, 40)
		binary.BigEndian.PutUint64(msg, seq)
		msg = append(msg, fmt.Sprintf("conn %d message", id)...)
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(maskedFrame(1, msg)); err != nil {
			return fmt.Errorf("message %d: %w", seq, err)
		}
		_, p, err := readFrame(br)
		if err != nil {
			return fmt.Errorf("echo %d: %w", seq, err)
		}
		if !bytes.Equal(p, msg) {
			return fmt.Errorf("echo %d: got %q, want %q", seq, p, msg)
		}
		c.wsMsgs.Add(1)
	}
}

// --- levee's process figures ---

func goroutines(admin string) int64 {
	resp, err := http.Get("http://" + admin + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	// "goroutine profile: total N"
	n, err := strconv.ParseInt(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func openFiles(pid int) int64 {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return int64(len(ents))
}

func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb << 10
			}
		}
	}
	return -1
}

// --- PostgreSQL: a throwaway cluster on loopback ---

type postgres struct {
	bin, dir, data string
	port           int
	readerDSN      string
	cred           *syscall.Credential
	cmd            *exec.Cmd
	done           chan struct{}
}

func startPG(root string) (*postgres, error) {
	p := &postgres{bin: *pgBin, dir: filepath.Join(root, "pg"), port: freePort()}
	p.data = filepath.Join(p.dir, "data")
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	_ = os.Chmod(root, 0o755)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, PostgreSQL needs the user postgres: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(p.dir, uid, gid); err != nil {
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(p.bin, "initdb"), "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if err := p.start(); err != nil {
		return nil, err
	}
	psql := exec.Command(filepath.Join(p.bin, "psql"), "-h", "127.0.0.1", "-p", strconv.Itoa(p.port), "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-c",
		`CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL);
		 INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 1000) g;
		 CREATE ROLE soak LOGIN; GRANT SELECT ON items TO soak;`)
	if out, err := psql.CombinedOutput(); err != nil {
		p.stop()
		return nil, fmt.Errorf("psql: %v: %s", err, out)
	}
	p.readerDSN = fmt.Sprintf("postgres://soak@127.0.0.1:%d/postgres?sslmode=disable", p.port)
	return p, nil
}

func (p *postgres) start() error {
	log, err := os.OpenFile(filepath.Join(p.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.data, "-p", strconv.Itoa(p.port), "-k", p.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "log_connections=on")
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return err
	}
	p.done = make(chan struct{})
	cmd, done := p.cmd, p.done
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), time.Second); err == nil {
			conn.Close()
			if out, err := exec.Command(filepath.Join(p.bin, "pg_isready"), "-h", "127.0.0.1", "-p", strconv.Itoa(p.port)).CombinedOutput(); err == nil || bytes.Contains(out, []byte("accepting")) {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("postgres did not start within 30 s")
}

// stop is a fast shutdown (SIGINT): sessions are ended, as a restart does.
func (p *postgres) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}
