package gateway

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// patternReader yields n bytes of a repeating pattern without holding them.
type patternReader struct{ left int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	p.left -= int64(len(b))
	return len(b), nil
}

// heapWatch samples the live heap every few milliseconds and keeps the peak.
type heapWatch struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func watchHeap() *heapWatch {
	w := &heapWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if h := heapBytes(); h > w.peak.Load() {
				w.peak.Store(h)
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *heapWatch) Stop() uint64 { close(w.stop); <-w.done; return w.peak.Load() }

// TestHundredMegabytesStreamBothWays: a 100 MB upload and a 100 MB download
// pass through levee while the process heap grows by less than 16 MB, so
// bodies are streamed, never buffered. Client, levee and upstream share this
// process, and none of them holds a body, so the heap bound covers levee.
func TestHundredMegabytesStreamBothWays(t *testing.T) {
	const size = 100 << 20
	var uploaded atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			n, _ := io.Copy(io.Discard, r.Body)
			uploaded.Store(n)
			fmt.Fprint(w, n)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		io.Copy(w, &patternReader{left: size})
	}))
	t.Cleanup(up.Close)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  big: {endpoints: [{address: %s}]}
routes:
  - {name: big, match: {path_prefix: /}, upstream: big}
`, hostPort(up)))
	h.get("/warm").Body.Close() // pools and buffers exist before the baseline

	runtime.GC()
	base := heapBytes()
	w := watchHeap()

	resp, err := h.client.Post(h.base+"/up", "application/octet-stream", io.NopCloser(&patternReader{left: size}))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != strconv.Itoa(size) || uploaded.Load() != size {
		t.Fatalf("upload: status %d, upstream got %s (%d) bytes", resp.StatusCode, body, uploaded.Load())
	}

	resp = h.get("/down")
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != size {
		t.Fatalf("download: %d bytes, err %v", n, err)
	}

	peak := w.Stop()
	growth := int64(peak) - int64(base)
	t.Logf("heap baseline %.1f MB, peak %.1f MB, growth %.1f MB over 2 x 100 MB", mb(base), mb(peak), float64(growth)/(1<<20))
	if growth > 16<<20 {
		t.Errorf("heap grew by %.1f MB while streaming 100 MB each way, want < 16 MB", float64(growth)/(1<<20))
	}
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// TestReloadUnderLoad: a client sending continuously while the config is
// reloaded 20 times (weights changed each time) sees no failure; an invalid
// reload leaves the old config serving and is counted.
func TestReloadUnderLoad(t *testing.T) {
	a, _ := backend(t, "a")
	b, _ := backend(t, "b")
	cfg := func(wa, wb int) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  pool:
    endpoints: [{address: %s, weight: %d}, {address: %s, weight: %d}]
routes:
  - {name: all, match: {path_prefix: /}, upstream: pool}
`, hostPort(a), wa, hostPort(b), wb)
	}
	h := start(t, cfg(1, 1))

	stop := make(chan struct{})
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	repeatUntil(stop, &wg, 4, func() {
		sent.Add(1)
		resp, err := h.client.Get(h.base + "/")
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, resp.Status)
		}
	})
	for i := range 20 {
		h.writeConfig(cfg(1+i%5, 5-i%5))
		if err := h.g.Reload(); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		n := sent.Load() // requests begun from here on use the new snapshot
		waitFor(t, "requests on the new snapshot", func() bool { return sent.Load() >= n+5 })
	}
	// An invalid file: refused whole; the previous snapshot keeps serving.
	h.writeConfig(strings.Replace(cfg(1, 1), "weight: 1}", `weight: "abc"}`, 1))
	if err := h.g.Reload(); err == nil {
		t.Fatal("reload of an invalid file succeeded")
	} else if !strings.Contains(err.Error(), "upstreams.pool.endpoints[0].weight") {
		t.Errorf("reload error does not name the field: %v", err)
	}
	n := sent.Load()
	waitFor(t, "requests after the refused reload", func() bool { return sent.Load() >= n+20 })
	close(stop)
	wg.Wait()
	t.Logf("%d requests during 20 reloads, %d failed", sent.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed during reloads; first: %v", failed.Load(), sent.Load(), firstErr.Load())
	}
	if sent.Load() < 100 {
		t.Fatalf("only %d requests sent; the load did not overlap the reloads", sent.Load())
	}
	if got := h.metric(`levee_config_reloads_total{result="success"}`); got != 20 {
		t.Errorf("reloads success = %v, want 20", got)
	}
	if got := h.metric(`levee_config_reloads_total{result="error"}`); got != 1 {
		t.Errorf("reloads error = %v, want 1", got)
	}
	// The admin API's reload refuses the same file with every problem listed.
	resp, err := h.client.Post(h.admin+"/api/v1/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 422 || !strings.Contains(string(body), "upstreams.pool.endpoints[0].weight") {
		t.Errorf("admin reload: %d %s", resp.StatusCode, body)
	}
	if resp := h.get("/"); resp.StatusCode != 200 {
		t.Errorf("after refused reloads: status %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
}

// TestHTTP2 serves HTTP/2 over TLS and h2c in clear text.
func TestHTTP2(t *testing.T) {
	a, _ := backend(t, "a")
	routes := fmt.Sprintf(`
upstreams:
  a: {endpoints: [{address: %s}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: a}
`, hostPort(a))

	t.Run("h2c", func(t *testing.T) {
		h := start(t, "listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\n"+routes)
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: p}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(h.base + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || string(body) != "a" {
			t.Fatalf("proto %s body %q", resp.Proto, body)
		}
		// The clear-text loop handed the connection to net/http.
		if got := h.metric(`levee_h1_handoffs_total{reason="h2_preface"}`); got != 1 {
			t.Errorf("levee_h1_handoffs_total{reason=\"h2_preface\"} = %v, want 1", got)
		}
	})
	t.Run("tls", func(t *testing.T) {
		certFile, keyFile, pool := selfSigned(t)
		h := start(t, fmt.Sprintf("listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\ntls: {cert_file: %s, key_file: %s}\n", certFile, keyFile)+routes)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(strings.Replace(h.base, "http://", "https://", 1) + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || string(body) != "a" {
			t.Fatalf("proto %s body %q", resp.Proto, body)
		}
	})
}

func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kb, _ := x509.MarshalECPrivateKey(key)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile, pool
}

// TestSlowlorisIsCut: a client that never finishes its headers is
// disconnected after server.read_header_timeout.
func TestSlowlorisIsCut(t *testing.T) {
	a, _ := backend(t, "a")
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
server: {read_header_timeout: 300ms}
upstreams:
  a: {endpoints: [{address: %s}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: a}
`, hostPort(a)))
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
	// Bound the test, not the feature: the server must hang up well before 10 s.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	startWait := time.Now()
	buf := make([]byte, 512)
	var got bytes.Buffer
	for {
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("connection still open after %v; read %q", time.Since(startWait), got.String())
			}
			break
		}
	}
	t.Logf("slow client cut after %v", time.Since(startWait).Round(time.Millisecond))
}
