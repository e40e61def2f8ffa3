package loadgen

import (
	"bufio"
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
)

// refusingServer answers every other request 503 with a JSON reason and
// counts the connections it accepted.
func refusingServer(t *testing.T) (*httptest.Server, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var n, conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"busy","reason":"queue_full"}`)
			return
		}
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n, &conns
}

func TestOpenRecordsEveryRequestInDueOrder(t *testing.T) {
	srv, served, conns := refusingServer(t)
	const total = 300
	shots := Open{Addr: srv.Listener.Addr().String(), Path: "/x", Rate: 3000, Total: total,
		Timeout: 2 * time.Second, Workers: 4}.Run()
	if len(shots) != total {
		t.Fatalf("%d shots, want %d", len(shots), total)
	}
	var ok, refused int
	for i, s := range shots {
		if want := time.Duration(i) * time.Second / 3000; s.Due != want {
			t.Fatalf("shot %d due at %v, want %v", i, s.Due, want)
		}
		switch {
		case s.Err != "" || s.TimedOut:
			t.Fatalf("shot %d failed: %+v", i, s)
		case s.Status == 200 && s.Reason == "":
			ok++
		case s.Status == 503 && s.Reason == "queue_full":
			refused++
		default:
			t.Fatalf("shot %d: %+v", i, s)
		}
		if s.Latency <= 0 {
			t.Fatalf("shot %d has latency %v", i, s.Latency)
		}
	}
	if ok != total/2 || refused != total/2 || served.Load() != total {
		t.Errorf("ok %d refused %d served %d, want %d, %d, %d", ok, refused, served.Load(), total/2, total/2, total)
	}
	// Keep-alive: at most one connection per worker.
	if c := conns.Load(); c < 1 || c > 4 {
		t.Errorf("%d connections for 4 workers", c)
	}
}

func TestOpenTimesOutAStalledServer(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	shots := Open{Addr: srv.Listener.Addr().String(), Path: "/", Rate: 1000, Total: 10,
		Timeout: 50 * time.Millisecond, Workers: 10}.Run()
	for i, s := range shots {
		if !s.TimedOut || s.Latency < 50*time.Millisecond || s.Status != 0 {
			t.Errorf("shot %d: %+v, want a timeout after 50ms", i, s)
		}
	}
}

func TestClosedKeepsEachClientBusy(t *testing.T) {
	srv, served, conns := refusingServer(t)
	const clients, dur = 3, 300 * time.Millisecond
	begin := time.Now()
	shots := Closed{Addr: srv.Listener.Addr().String(), Path: "/", Clients: clients, Duration: dur,
		Timeout: time.Second}.Run()
	if took := time.Since(begin); took > dur+time.Second {
		t.Errorf("Run took %v, want at most Duration + Timeout", took)
	}
	if len(shots) < 30 {
		t.Fatalf("%d requests in %v from %d clients against a local server", len(shots), dur, clients)
	}
	for _, s := range shots {
		if s.Err != "" || s.TimedOut || s.Status != 200 && s.Reason != "queue_full" {
			t.Fatalf("shot %+v", s)
		}
		if s.Due+s.Latency > dur {
			t.Fatalf("shot ended at %v, after the run's %v", s.Due+s.Latency, dur)
		}
	}
	// Every shot kept was served; at most one per client was left out.
	if n := served.Load(); n < int64(len(shots)) || n > int64(len(shots)+clients) {
		t.Errorf("served %d, recorded %d", n, len(shots))
	}
	if c := conns.Load(); c != clients {
		t.Errorf("%d connections, want one per client (%d)", c, clients)
	}
}

// answering serves one connection: it reads a request head, then writes
// answer and closes.
func answering(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		io.WriteString(c, answer)
	})
	return ln.Addr().String()
}

func TestExchangeRefusesWhatItCannotFrame(t *testing.T) {
	many := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", maxHeaderLines+1) + "Content-Length: 0\r\n\r\n"
	for name, answer := range map[string]string{
		"no content length": "HTTP/1.1 200 OK\r\n\r\nok",
		"bad length":        "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
		"huge length":       fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", maxBody+1),
		"http/1.0":          "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
		"bad status":        "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
		"short body":        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
		"too many lines":    many,
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Dial(answering(t, answer), time.Now().Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if status, _, err := c.Exchange(Request("/", nil), time.Now().Add(2*time.Second)); err == nil {
				t.Errorf("status %d and no error", status)
			}
		})
	}
}

func TestExchangeReadsStatusBodyAndReason(t *testing.T) {
	body := `{"error":"x","reason":"shed_priority"}`
	c, err := Dial(answering(t, fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\ncontent-length: %d\r\nRetry-After: 1\r\n\r\n%s", len(body), body)),
		time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	status, got, err := c.Exchange(Request("/", []string{"Levee-Attempt: 2"}), time.Now().Add(2*time.Second))
	if err != nil || status != 503 || string(got) != body || JSONReason(got) != "shed_priority" {
		t.Errorf("got %d %q %v", status, got, err)
	}
}

func TestSequentialStopsAtTheFirstNon200(t *testing.T) {
	srv, _, _ := refusingServer(t)
	lat, err := Sequential(srv.Listener.Addr().String(), "/", 5, time.Second)
	if err == nil || !strings.Contains(err.Error(), "request 2 of 5: status 503") || len(lat) != 1 {
		t.Errorf("latencies %v, error %v; want one latency and a 503 at request 2", lat, err)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {1, 1}} {
		if got := Percentile(ds, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if ds[0] != 5 {
		t.Error("Percentile sorted its argument")
	}
	if Percentile(nil, 50) != 0 {
		t.Error("empty: want 0")
	}
}

// FuzzExchange: whatever a server answers, Exchange returns by its
// deadline without panicking, and a success has a plausible status and a
// body within the limit.
func FuzzExchange(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	f.Add([]byte("HTTP/1.1 503 x\r\nContent-Length: 5\r\nContent-Length: 3\r\n\r\nabc"))
	f.Add([]byte("HTTP/1.1 999 \r\nContent-Length: -1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, answer []byte) {
		client, server := net.Pipe()
		defer client.Close()
		go func() {
			defer server.Close()
			server.SetDeadline(time.Now().Add(time.Second))
			br := bufio.NewReader(server)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			server.Write(answer)
		}()
		c := &Conn{Conn: client, br: bufio.NewReaderSize(client, 8192)}
		status, body, err := c.Exchange(Request("/", nil), time.Now().Add(time.Second))
		if err != nil {
			return
		}
		if status < 100 || status > 999 || len(body) > maxBody {
			t.Fatalf("accepted status %d with a %d-byte body", status, len(body))
		}
	})
}
