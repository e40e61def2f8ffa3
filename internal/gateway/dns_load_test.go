//go:build !race

package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestDNSRecordsChangeUnderLoad (issue 24 item 7): requests keep
// succeeding while a DNS-named upstream's A records change under them
// every 1.2 s for 8 s (TTL 1 s). Every backend stays up, so a request that
// fails means a swap lost an endpoint or a request in flight; none may
// fail, and every address must have served.
func TestDNSRecordsChangeUnderLoad(t *testing.T) {
	z := startZoneServer(t)
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	port, backends := startIPBackends(t, ips...)
	// Consecutive sets share at least half their weight, so the delta
	// guard applies each change at once.
	sets := [][]string{{ips[0], ips[1]}, {ips[1], ips[2]}, {ips[2], ips[0]}, {ips[0], ips[1], ips[2]}}
	setA := func(s []string) {
		lines := make([]string, len(s))
		for i, ip := range s {
			lines[i] = "api.test. 1 IN A " + ip
		}
		z.set("api.test", dns.TypeA, lines...)
	}
	setA(sets[0])
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  api:
    discovery: {dns: {name: "api.test:%d", resolver: %q}}
routes:
  - {name: api, match: {path_prefix: /}, upstream: api}
`, port, z.addr))
	waitServedSet(t, h, "/x", 10*time.Second, sets[0]...)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	for range 8 { // 8 closed-loop clients
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				resp, err := client.Get(h.base + "/x")
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %s", resp.Status)
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				ok.Add(1)
			}
		}()
	}
	changes := 0
	tick := time.NewTicker(1200 * time.Millisecond)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			changes++
			setA(sets[changes%len(sets)])
		}
	}
	tick.Stop()
	wg.Wait()
	var hits []int64
	for _, b := range backends {
		hits = append(hits, b.hits.Load())
	}
	t.Logf("%d requests succeeded, %d failed, over %d record changes; hits per address %v; applied updates %v",
		ok.Load(), failed.Load(), changes, hits, h.metric(`levee_discovery_updates_total{result="applied",upstream="api"}`))
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed while the records changed (first: %v)", failed.Load(), firstErr.Load())
	}
	if ok.Load() < 500 {
		t.Fatalf("only %d requests in 8 s", ok.Load())
	}
	for i, n := range hits {
		if n == 0 {
			t.Errorf("address %s never served", ips[i])
		}
	}
}
