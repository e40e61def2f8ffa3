package datacache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/datacache"
)

// serve is a data route's use of the cache: a hit is written from the
// entry; a miss streams the query's rows to the client while the flight
// keeps a copy, then commits it for the requests waiting on the same key.
func serve(c *datacache.Cache, key string, now time.Time, client io.Writer, query func(io.Writer) error) {
	pol := datacache.Policy{TTL: 30 * time.Second, StaleIfError: 10 * time.Minute}
	res, err := c.Begin(context.Background(), key, pol, now)
	switch {
	case err != nil:
		fmt.Println("503:", err)
	case res.Entry != nil:
		fmt.Printf("Levee-Cache: %s, Age: %d, body %s\n", res.Status.Header(), res.AgeSeconds(), res.Entry.Body)
	default:
		f := res.Flight
		defer f.Abandon(errors.New("stream cut short")) // a no-op after Commit
		if err := query(io.MultiWriter(client, f)); err != nil {
			f.Abandon(err)
			if datacache.IsSourceFailure(err) {
				if s := c.Stale(key, pol, now); s.Entry != nil {
					fmt.Printf("Levee-Cache: %s, Age: %d, body %s\n", s.Status.Header(), s.AgeSeconds(), s.Entry.Body)
					return
				}
			}
			fmt.Println("503:", err)
			return
		}
		f.Commit("application/x-ndjson", now)
		fmt.Printf("Levee-Cache: %s\n", res.Status.Header())
	}
}

func Example() {
	c, err := datacache.New(datacache.Options{MaxBytes: 64 << 20, MaxEntryBytes: 8 << 20})
	if err != nil {
		panic(err)
	}
	var client strings.Builder
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := func(w io.Writer) error { _, err := io.WriteString(w, `{"id":1}`); return err }
	down := func(io.Writer) error { return datacache.SourceFailure(errors.New("connection refused")) }

	serve(c, "orders-v1|ndjson|customer_id=7", t0, &client, rows)
	fmt.Println(client.String())
	serve(c, "orders-v1|ndjson|customer_id=7", t0.Add(5*time.Second), &client, rows)
	serve(c, "orders-v1|ndjson|customer_id=7", t0.Add(2*time.Minute), &client, down)
	serve(c, "orders-v1|ndjson|customer_id=8", t0.Add(2*time.Minute), &client, down)
	// Output:
	// Levee-Cache: miss
	// {"id":1}
	// Levee-Cache: hit, Age: 5, body {"id":1}
	// Levee-Cache: stale, Age: 120, body {"id":1}
	// 503: connection refused
}
