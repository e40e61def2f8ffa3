//go:build !race

package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAdminEndpointPagesRSS: the measurement. Eight readers at
// once each walk every page, at the largest page size (10,000, the heavy
// case: the most JSON per answer), of an upstream of 100,000 pushed
// endpoints; a reader refused 503 admin_busy retries after its
// Retry-After. Before paging, four such reads of the whole list took RSS
// up 630-720 MiB and eight 1.1 GB. The process's resident set (levee and
// the readers share it) may grow by less than 64 MiB over its baseline
// after the push, at its peak (sampled every 5 ms) as after.
func TestAdminEndpointPagesRSS(t *testing.T) {
	const (
		n       = 100_000
		readers = 8
		limit   = 10000
		maxGrow = 64 << 20
	)
	h := start(t, bigUpstreamConfig)
	bigPush(t, h, n)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: readers}, Timeout: 60 * time.Second}
	defer client.CloseIdleConnections()

	// walk reads every page; it returns the endpoints counted, the bytes
	// read and the 503s met. The body is counted as it streams in (a
	// reader holding 3 MB pages would measure itself).
	walk := func() (endpoints, read, busy int, err error) {
		path := "/api/v1/upstreams/pushed/endpoints?limit=" + strconv.Itoa(limit)
		for pages := 0; path != ""; pages++ {
			if pages > n/limit+busyRetries {
				return endpoints, read, busy, fmt.Errorf("more than %d pages", pages)
			}
			resp, err := client.Get(h.admin + path)
			if err != nil {
				return endpoints, read, busy, err
			}
			c := &pageCounter{}
			_, err = io.Copy(c, resp.Body)
			resp.Body.Close()
			if err != nil {
				return endpoints, read, busy, err
			}
			read += c.bytes
			switch resp.StatusCode {
			case http.StatusOK:
				endpoints += c.addresses
				path = c.next()
			case http.StatusServiceUnavailable:
				busy++
				secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
				if secs < 1 || !bytes.Contains(c.tail, []byte(`"admin_busy"`)) {
					return endpoints, read, busy, fmt.Errorf("503 without admin_busy and Retry-After: %q %s", resp.Header.Get("Retry-After"), c.tail)
				}
				time.Sleep(time.Duration(secs) * time.Second) // the client honours Retry-After
			default:
				return endpoints, read, busy, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, c.tail)
			}
		}
		return endpoints, read, busy, nil
	}
	// A first walk sorts the upstream's address index (kept while its
	// endpoints do not change), as the first reader after a push would.
	if got, _, _, err := walk(); err != nil || got != n {
		t.Fatalf("first walk: %d endpoints, %v", got, err)
	}

	base := rssBaseline(t)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	var peak atomic.Int64
	peak.Store(base)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // samples RSS until stop; not a wait for a state
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if r := rssBytes(t); r > peak.Load() {
					peak.Store(r)
				}
			}
		}
	}()
	t0 := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var totalRead, totalBusy int
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, read, busy, err := walk()
			if err == nil && got != n {
				err = fmt.Errorf("walked %d endpoints, want %d", got, n)
			}
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			totalRead += read
			totalBusy += busy
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	close(stop)
	<-sampled
	runtime.ReadMemStats(&ms1)
	after := rssBaseline(t)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	grow, held := peak.Load()-base, after-base
	t.Logf("%d readers walked %d endpoints each in pages of %d: %.1f MB read in %v, %d admin_busy refusals (retried); RSS baseline %d MiB, peak +%.1f MiB, after +%.1f MiB",
		readers, n, limit, float64(totalRead)/1e6, elapsed.Round(time.Millisecond), totalBusy, base>>20, float64(grow)/(1<<20), float64(held)/(1<<20))
	t.Logf("heap: %.1f MiB live at the baseline; %.1f MB allocated during the reads (%.0f bytes per endpoint listed, readers included), %d GCs",
		float64(ms0.HeapAlloc)/(1<<20), float64(ms1.TotalAlloc-ms0.TotalAlloc)/1e6, float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(readers*n), ms1.NumGC-ms0.NumGC)
	if grow >= maxGrow {
		t.Errorf("RSS grew %.1f MiB at its peak, want under %d MiB", float64(grow)/(1<<20), maxGrow>>20)
	}
	if held >= maxGrow {
		t.Errorf("RSS stayed %.1f MiB above its baseline after the reads, want under %d MiB", float64(held)/(1<<20), maxGrow>>20)
	}
}

// busyRetries bounds the admin_busy refusals a walk may meet on top of its
// pages (at 1 s each, far more than eight readers over four slots need).
const busyRetries = 60

// pageCounter counts an answer's bytes and `"address"` keys as they
// stream through, keeping only the last 1 KiB (where "next" is). It
// allocates nothing per write: the readers share the process whose RSS
// is measured.
type pageCounter struct {
	bytes, addresses int
	tail             []byte
	carry            [16]byte // the last len(addressKey)-1 bytes seen
	ncarry           int
}

var addressKey = []byte(`"address":`)

const tailBytes = 1024

func (c *pageCounter) Write(p []byte) (int, error) {
	c.bytes += len(p)
	c.addresses += bytes.Count(p, addressKey)
	// A key across the previous write and this one: it begins in carry
	// (shorter than a key, so no key lies in it whole) and ends in p.
	var across [32]byte
	k := copy(across[:], c.carry[:c.ncarry])
	k += copy(across[k:], p[:min(len(p), len(addressKey)-1)])
	c.addresses += bytes.Count(across[:k], addressKey)
	if len(p) >= len(addressKey)-1 {
		c.ncarry = copy(c.carry[:], p[len(p)-(len(addressKey)-1):])
	} else {
		c.ncarry = copy(c.carry[:], across[max(0, k-(len(addressKey)-1)):k])
	}
	if c.tail == nil {
		c.tail = make([]byte, 0, 2*tailBytes)
	}
	if len(p) >= tailBytes {
		c.tail = append(c.tail[:0], p[len(p)-tailBytes:]...)
	} else {
		if len(c.tail)+len(p) > cap(c.tail) {
			n := copy(c.tail, c.tail[len(c.tail)-(tailBytes-len(p)):])
			c.tail = c.tail[:n]
		}
		c.tail = append(c.tail, p...)
	}
	return len(p), nil
}

var nextRe = regexp.MustCompile(`"next": "([^"]+)"`)

// next is the page's next link, "" on the last page.
func (c *pageCounter) next() string {
	m := nextRe.FindSubmatch(c.tail)
	if m == nil {
		return ""
	}
	return string(m[1])
}
