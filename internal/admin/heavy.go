package admin

import (
	"fmt"
	"net/http"
	"time"
)

// Heavy reads: the admin answers whose cost grows with what levee serves
// rather than with the request, so that a few of them at once (a read
// token, or the UI open in a few tabs) could take hundreds of MiB:
//
//   - the upstream reads (upstreams.go): up to MaxEndpointPage endpoints
//     per upstream, over every upstream; streamed, but each still costs a
//     buffer, a chunk of views and the CPU of sorting and encoding;
//   - GET /api/v1/config: the effective configuration rendered whole;
//   - GET /api/v1/openapi.json: the data plane's document, built per
//     request with its data sources asked for their columns.
//
// At most MaxHeavyReads of them run at once; one more is answered 503
// admin_busy with Retry-After at once, never queued (a queue would hold
// goroutines and connections without bound). Not counted: /metrics, which
// promhttp bounds itself (4 scrapes at once, its own 503), so that an
// operator reading upstreams never makes Prometheus miss a scrape; the
// pages of apps and data APIs (at most 1000 rows, read from SQLite); the
// summary and routes, bounded by the metrics' labels and the
// configuration; pprof, which an operator runs deliberately.

// MaxHeavyReads bounds the heavy admin reads in progress at once.
const MaxHeavyReads = 4

// heavyRetryAfter is the Retry-After of admin_busy, in seconds: a page of
// MaxEndpointPage endpoints is written in well under a second.
const heavyRetryAfter = 1

// heavyWriteTimeout bounds how long a heavy read may take to be written to
// its client, so that a client that stops reading frees its slot.
const heavyWriteTimeout = 30 * time.Second

// heavyPatterns are the mux patterns that take a heavy-read slot.
var heavyPatterns = map[string]bool{
	"GET /api/v1/upstreams":                  true,
	"GET /api/v1/upstreams/{name}":           true,
	"GET /api/v1/upstreams/{name}/endpoints": true,
	"GET /api/v1/config":                     true,
	"GET /api/v1/openapi.json":               true,
}

// heavyGate is a counting semaphore without a queue. Safe for concurrent
// use.
type heavyGate struct{ slots chan struct{} }

func newHeavyGate(n int) *heavyGate { return &heavyGate{slots: make(chan struct{}, n)} }

// wrap returns h behind the gate: the slot is held until h returns, and
// h's writes must be done within heavyWriteTimeout.
func (g *heavyGate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case g.slots <- struct{}{}:
		default:
			w.Header().Set("Retry-After", fmt.Sprint(heavyRetryAfter))
			writeError(w, http.StatusServiceUnavailable, "admin_busy",
				fmt.Sprintf("%d heavy admin reads (upstream lists, the configuration, the OpenAPI document) are in progress; retry in %d s", cap(g.slots), heavyRetryAfter))
			return
		}
		defer func() { <-g.slots }()
		// An error means the writer cannot take deadlines (not the
		// admin listener's): the answer is then only bounded in size.
		rc := http.NewResponseController(w)
		if rc.SetWriteDeadline(time.Now().Add(heavyWriteTimeout)) == nil {
			// The deadline stays on the connection: written out, the
			// answer's is lifted for the next request on it.
			defer func() {
				_ = rc.Flush()
				_ = rc.SetWriteDeadline(time.Time{})
			}()
		}
		h.ServeHTTP(w, r)
	})
}
