package client_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/client"
)

func Example() {
	// A service whose gateway fails the first call with 502 Bad Gateway.
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		fmt.Fprintf(w, "hello on attempt %s", r.Header.Get(client.AttemptHeader))
	}))
	defer srv.Close()

	t, err := client.New(client.Options{
		Base:    srv.Client().Transport, // nil means http.DefaultTransport
		Backoff: client.Backoff{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond},
	})
	if err != nil {
		log.Fatal(err)
	}
	c := &http.Client{Transport: t, Timeout: 5 * time.Second}

	resp, err := c.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var body [64]byte
	n, _ := resp.Body.Read(body[:])
	fmt.Println(resp.Status, string(body[:n]))

	s := t.Stats()
	fmt.Printf("attempts %d, retries %d\n", s.Attempts, s.Retries)
	// Output:
	// 200 OK hello on attempt 2
	// attempts 2, retries 1
}

func ExampleParseRetryAfter() {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Sat, 01 Mar 2025 12:00:30 GMT", "Sat, 01 Mar 2025 11:00:00 GMT", "soon"} {
		d, ok := client.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 30s true
	// 0s true
	// 0s false
}
