// Package loadgen is a lean HTTP/1.1 load generator for levee's load tests
// and benchmarks: an open loop (requests due at a fixed rate, whatever the
// answers' latency) and a closed loop (clients that send their next request
// as soon as the last one ended, with no backoff).
//
// Why its own: on a 2-core machine the load generator shares the cores with
// the proxy and the backend. A net/http client spends several times a
// proxy's CPU per request, so at 10,000 requests/s it saturates the machine
// by itself and the proxies are then measured by how much CPU they leave it
// (docs/notes/admission-history.md, "The client, not the host"). This one writes a prepared
// request and reads the answer with one buffered reader per keep-alive
// connection: about one write and one read per request, no allocation but
// the outcomes.
//
// It only understands what levee, the benchmark backends and the anchor
// proxies answer to a GET: a status line, header lines and a Content-Length
// body. Anything else is a transport error for that request.
package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Shot is one request's outcome. The JSON names are short because tests
// pass hundreds of thousands of them from a child process.
type Shot struct {
	Due      time.Duration `json:"d"` // since the run began: when it was due (open) or sent (closed)
	Latency  time.Duration `json:"l"` // from Due to the end of the answer or the failure
	Status   int           `json:"s,omitempty"`
	Reason   string        `json:"r,omitempty"` // the JSON body's "reason", for a non-2xx answer
	TimedOut bool          `json:"t,omitempty"`
	Err      string        `json:"e,omitempty"` // a transport error other than a timeout
}

// Open offers Total requests at Rate per second over at most Workers
// keep-alive connections. A request waits for a free connection, and that
// wait counts in its latency, which runs from its due time (no coordinated
// omission). Timeout bounds each request from its due time.
type Open struct {
	Addr    string
	Path    string
	Rate    int // requests per second, > 0
	Total   int // requests offered
	Timeout time.Duration
	Workers int // connections, so the most requests in flight
	// Header holds extra request header lines, "Name: value" each.
	Header []string
}

// Run offers the requests and returns their outcomes in due order. It
// returns when the last request has ended, at most Timeout after the last
// one was due.
func (o Open) Run() []Shot {
	req := Request(o.Path, o.Header)
	begin := time.Now()
	due := func(i int) time.Time { return begin.Add(time.Duration(i) * time.Second / time.Duration(o.Rate)) }
	tickets := make(chan int, o.Total) // bounded: one slot per request
	out := make([]Shot, o.Total)
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Go(func() {
			var c *Conn
			defer func() { c.Close() }()
			for i := range tickets {
				t := due(i)
				s := &out[i]
				s.Due = t.Sub(begin)
				c = s.take(c, o.Addr, req, t, o.Timeout)
			}
		})
	}
	for i := range o.Total {
		if d := time.Until(due(i)); d > 0 {
			time.Sleep(d) // coarse: a late wake-up releases the overdue requests at once
		}
		tickets <- i
	}
	close(tickets)
	wg.Wait()
	return out
}

// Closed runs Clients clients for Duration, each sending its next request
// as soon as the last one was answered, refused, failed or timed out: the
// retry storm of clients without backoff. Timeout bounds each request.
type Closed struct {
	Addr     string
	Path     string
	Clients  int
	Duration time.Duration
	Timeout  time.Duration
	Header   []string
}

// Run runs the clients and returns every request's outcome, in no
// particular order. A request still in flight when Duration ends is left
// out; Run returns at most Timeout after Duration.
func (c Closed) Run() []Shot {
	req := Request(c.Path, c.Header)
	begin := time.Now()
	end := begin.Add(c.Duration)
	per := make([][]Shot, c.Clients)
	var wg sync.WaitGroup
	for k := range c.Clients {
		wg.Go(func() {
			var conn *Conn
			defer func() { conn.Close() }()
			// Bounded by Duration: every pass ends within Timeout.
			for t := time.Now(); t.Before(end); t = time.Now() {
				s := Shot{Due: t.Sub(begin)}
				conn = s.take(conn, c.Addr, req, t, c.Timeout)
				if t.Add(s.Latency).Before(end) {
					per[k] = append(per[k], s)
				}
			}
		})
	}
	wg.Wait()
	return slices.Concat(per...)
}

// take performs one request on c (dialling first when c is nil), records
// it in s, and returns the connection to use next (nil after an error).
func (s *Shot) take(c *Conn, addr string, req []byte, due time.Time, timeout time.Duration) *Conn {
	deadline := due.Add(timeout)
	if c == nil {
		var err error
		if c, err = Dial(addr, deadline); err != nil {
			s.record(err, time.Since(due))
			return nil
		}
	}
	status, body, err := c.Exchange(req, deadline)
	s.Latency = time.Since(due)
	if err != nil {
		s.record(err, s.Latency)
		c.Close()
		return nil
	}
	s.Status = status
	if status/100 != 2 {
		s.Reason = JSONReason(body)
	}
	return c
}

func (s *Shot) record(err error, latency time.Duration) {
	s.Latency = latency
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s.TimedOut = true
		return
	}
	s.Err = err.Error()
}

// Request is a GET for path with the extra header lines, ready to write.
func Request(path string, header []string) []byte {
	head := "GET " + path + " HTTP/1.1\r\nHost: levee.test\r\nUser-Agent: levee-loadgen\r\n"
	for _, h := range header {
		head += h + "\r\n"
	}
	return []byte(head + "\r\n")
}

// Conn is one keep-alive client connection.
type Conn struct {
	net.Conn
	br   *bufio.Reader
	body []byte
}

// Dial connects to addr by the deadline.
func Dial(addr string, deadline time.Time) (*Conn, error) {
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: c, br: bufio.NewReaderSize(c, 8192)}, nil
}

// Close closes the connection; a nil Conn is already closed.
func (c *Conn) Close() error {
	if c == nil {
		return nil
	}
	return c.Conn.Close()
}

// Limits on an answer, so a broken server cannot make the client loop or
// swell: header lines (each within the reader's 8 KiB) and body bytes.
const (
	maxHeaderLines = 100
	maxBody        = 1 << 20
)

// Exchange writes req and reads one answer with a Content-Length body, all
// by the deadline. The body is valid until the next Exchange.
func (c *Conn) Exchange(req []byte, deadline time.Time) (status int, body []byte, err error) {
	if err := c.SetDeadline(deadline); err != nil {
		return 0, nil, err
	}
	if _, err := c.Write(req); err != nil {
		return 0, nil, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil || status < 100 {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	for n := 0; ; n++ {
		if n == maxHeaderLines {
			return 0, nil, fmt.Errorf("more than %d header lines", maxHeaderLines)
		}
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if bytes.EqualFold(name, []byte("Content-Length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil {
				return 0, nil, fmt.Errorf("bad Content-Length %q", value)
			}
		}
	}
	if length < 0 || length > maxBody {
		return 0, nil, fmt.Errorf("status %d: no usable Content-Length (%d)", status, length)
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.br, c.body); err != nil {
		return 0, nil, err
	}
	return status, c.body, nil
}

// JSONReason extracts "reason":"..." from a refusal's JSON body, or "".
func JSONReason(body []byte) string {
	const key = `"reason":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return ""
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// Sequential sends n requests for path one after another on one connection
// and returns their latencies; an answer other than 200, or an error, ends
// it with an error.
func Sequential(addr, path string, n int, timeout time.Duration) ([]time.Duration, error) {
	c, err := Dial(addr, time.Now().Add(timeout))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	req := Request(path, nil)
	lat := make([]time.Duration, 0, n)
	for i := range n {
		begin := time.Now()
		status, _, err := c.Exchange(req, begin.Add(timeout))
		if err != nil {
			return lat, fmt.Errorf("request %d of %d: %w", i+1, n, err)
		}
		if status != 200 {
			return lat, fmt.Errorf("request %d of %d: status %d", i+1, n, status)
		}
		lat = append(lat, time.Since(begin))
	}
	return lat, nil
}

// Percentile returns the p-th percentile (0 < p <= 100) of ds by nearest
// rank, or 0 for none. ds is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
