package gateway

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

// openLoop offers HTTP/1.1 GET requests at a fixed rate over raw keep-alive
// connections, whatever the answers' latency: the arrival process of users
// pressing refresh and of retrying clients. It is lean on purpose (one
// write and about one read per request, no net/http client), so that on a
// 2-core machine the load generator in the test process leaves the CPU to
// levee. A request's latency runs from its due time, so time it spent
// waiting for a free connection in the client counts (no coordinated
// omission).
type openLoop struct {
	Addr    string
	Path    string
	Rate    int           // requests per second
	Total   int           // requests offered
	Timeout time.Duration // per request, from its due time
	Workers int           // connections, the most requests in flight
	// Header holds extra request header lines, "Name: value" each.
	Header []string
}

// shot is one request's outcome.
type shot struct {
	Due      time.Duration `json:"d"` // since the run began
	Latency  time.Duration `json:"l"`
	Status   int           `json:"s,omitempty"`
	Reason   string        `json:"r,omitempty"` // the JSON body's reason, for a non-2xx answer
	TimedOut bool          `json:"t,omitempty"`
	Err      string        `json:"e,omitempty"` // a transport error other than a timeout
}

// run offers o.Total requests and returns their outcomes in due order.
func (o openLoop) run() []shot {
	head := "GET " + o.Path + " HTTP/1.1\r\nHost: levee.test\r\nUser-Agent: openloop\r\n"
	for _, h := range o.Header {
		head += h + "\r\n"
	}
	req := []byte(head + "\r\n")
	begin := time.Now()
	tickets := make(chan int, o.Total) // bounded: one slot per request
	out := make([]shot, o.Total)
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c *rawConn
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			for i := range tickets {
				due := begin.Add(time.Duration(i) * time.Second / time.Duration(o.Rate))
				s := &out[i]
				s.Due = due.Sub(begin)
				if c == nil {
					var err error
					if c, err = dialRaw(o.Addr, due.Add(o.Timeout)); err != nil {
						s.record(err, time.Since(due))
						continue
					}
				}
				status, body, err := c.exchange(req, due.Add(o.Timeout))
				s.Latency = time.Since(due)
				if err != nil {
					s.record(err, s.Latency)
					c.Close()
					c = nil
					continue
				}
				s.Status = status
				if status/100 != 2 {
					s.Reason = jsonReason(body)
				}
			}
		}()
	}
	for i := range o.Total {
		if d := time.Until(begin.Add(time.Duration(i) * time.Second / time.Duration(o.Rate))); d > 0 {
			time.Sleep(d) // coarse: a late wake-up releases the overdue requests at once
		}
		tickets <- i
	}
	close(tickets)
	wg.Wait()
	return out
}

func (s *shot) record(err error, latency time.Duration) {
	s.Latency = latency
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s.TimedOut = true
		return
	}
	s.Err = err.Error()
}

// rawConn is one keep-alive client connection.
type rawConn struct {
	net.Conn
	br   *bufio.Reader
	body []byte
}

func dialRaw(addr string, deadline time.Time) (*rawConn, error) {
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawConn{Conn: c, br: bufio.NewReaderSize(c, 8192)}, nil
}

// exchange writes req and reads one response with a Content-Length body
// (levee's answers and the test backends' all have one). The body is valid
// until the next exchange.
func (c *rawConn) exchange(req []byte, deadline time.Time) (status int, body []byte, err error) {
	c.SetDeadline(deadline)
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
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	for n := 0; ; n++ {
		if n > 100 {
			return 0, nil, errors.New("more than 100 header lines")
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
	if length < 0 || length > 1<<20 {
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

// jsonReason extracts "reason":"..." from a levee refusal body.
func jsonReason(body []byte) string {
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

// sequentialLatencies sends n requests one after another on one connection
// and returns their latencies; any answer other than 200 or any error is
// returned as an error.
func sequentialLatencies(addr, path string, n int, timeout time.Duration) ([]time.Duration, error) {
	c, err := dialRaw(addr, time.Now().Add(timeout))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	req := []byte("GET " + path + " HTTP/1.1\r\nHost: levee.test\r\n\r\n")
	lat := make([]time.Duration, 0, n)
	for i := range n {
		begin := time.Now()
		status, _, err := c.exchange(req, begin.Add(timeout))
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

// percentile returns the p-th percentile (0 < p <= 100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
