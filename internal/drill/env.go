package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// env is one drill's throwaway world: its backends, its apps, and what
// cleanup must undo.
type env struct {
	o        Options
	id       string // "levee-drill-<hex>-<drill>" prefix of app ids
	backends []*backend
	apps     []string
	pushed   bool
	// registry is the file of the registry drill's upstream, set once
	// prepare has found it; written says the drill wrote it (cleanup
	// empties it).
	registry string
	written  bool
	client   *http.Client
}

func newEnv(o Options, name string) *env {
	return &env{
		o:  o,
		id: "levee-drill-" + runID() + "-" + name,
		client: &http.Client{
			Timeout: requestTimeout,
			Transport: &http.Transport{
				MaxIdleConnsPerHost: maxInflight,
				MaxConnsPerHost:     maxInflight,
				IdleConnTimeout:     5 * time.Second,
			},
		},
	}
}

// prepare checks that the drill upstream exists, is push-fed and is empty
// (no other drill running, not a production upstream).
func (e *env) prepare(ctx context.Context, registry bool) error {
	if registry {
		return e.prepareRegistry(ctx)
	}
	u, err := e.upstream(ctx)
	if err != nil {
		return fmt.Errorf("the drill upstream %q (declare it as docs/drills.md shows): %w", e.o.Upstream, err)
	}
	if u.Discovery == nil || u.Discovery.Source != "push" {
		return fmt.Errorf("upstream %q must have discovery: {push: true} (docs/drills.md)", e.o.Upstream)
	}
	if u.EndpointsTotal != 0 {
		return fmt.Errorf("upstream %q has %d endpoints: another drill is running, or it is not the drill upstream", e.o.Upstream, u.EndpointsTotal)
	}
	return nil
}

// cleanup stops the backends, empties the drill upstream and deletes the
// drill's apps, on its own deadline. It returns what failed.
func (e *env) cleanup() []string {
	ctx, cancel := context.WithTimeout(context.Background(), CleanupTimeout)
	defer cancel()
	var errs []string
	if e.written {
		if err := e.emptyRegistry(ctx); err != nil {
			errs = append(errs, "emptying registry file "+e.registry+": "+err.Error())
		}
	}
	if e.pushed {
		if _, err := e.push(ctx, "[]"); err != nil {
			errs = append(errs, "emptying upstream "+e.o.Upstream+": "+err.Error())
		}
	}
	for _, id := range e.apps {
		if _, err := e.o.Admin.Do(ctx, "DELETE", "/api/v1/apps/"+url.PathEscape(id), nil); err != nil {
			errs = append(errs, "deleting app "+id+": "+err.Error())
		}
	}
	for _, b := range e.backends {
		b.kill()
	}
	e.client.CloseIdleConnections()
	return errs
}

// app creates a drill app granted the drill route, with limits (a JSON
// object or ""), and returns one of its API keys.
func (e *env) app(ctx context.Context, suffix, limits string) (string, error) {
	return e.appFor(ctx, suffix, e.o.Route, limits)
}

// appFor is app granted route.
func (e *env) appFor(ctx context.Context, suffix, route, limits string) (string, error) {
	id := e.id + "-" + suffix
	body := fmt.Sprintf(`{"id":%q,"grants":[%q]`, id, route)
	if limits != "" {
		body += `,"limits":` + limits
	}
	if _, err := e.o.Admin.Do(ctx, "POST", "/api/v1/apps", []byte(body+"}")); err != nil {
		return "", fmt.Errorf("creating app %s: %w", id, err)
	}
	e.apps = append(e.apps, id)
	raw, err := e.o.Admin.Do(ctx, "POST", "/api/v1/apps/"+url.PathEscape(id)+"/keys", nil)
	if err != nil {
		return "", fmt.Errorf("creating a key for %s: %w", id, err)
	}
	var k struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(raw, &k); err != nil || k.Key == "" {
		return "", fmt.Errorf("key for %s: no key in the answer", id)
	}
	return k.Key, nil
}

// backend is a synthetic HTTP backend on loopback that counts its requests.
type backend struct {
	addr string
	srv  *http.Server
	hits atomic.Int64
	once sync.Once
}

func (e *env) backend() (*backend, error) { return e.slowBackend(0, 0) }

// slowBackend is a backend with a capacity, as a service with a fixed
// worker pool: each request holds one of slots for hold (slots 0: no
// limit, no hold). Requests beyond the slots wait for one, as they would
// in the pool's queue.
func (e *env) slowBackend(slots int, hold time.Duration) (*backend, error) {
	var sem chan struct{}
	if slots > 0 {
		sem = make(chan struct{}, slots)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &backend{addr: ln.Addr().String()}
	b.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if sem != nil {
				select {
				case sem <- struct{}{}:
				case <-r.Context().Done():
					return
				}
				tm := time.NewTimer(hold)
				select {
				case <-tm.C:
				case <-r.Context().Done():
					tm.Stop()
				}
				<-sem
			}
			b.hits.Add(1)
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "levee drill backend\n")
		}),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       30 * time.Second,
	}
	go func() { _ = b.srv.Serve(ln) }()
	e.backends = append(e.backends, b)
	return b, nil
}

// kill stops the backend at once: its listener and every connection close.
func (b *backend) kill() { b.once.Do(func() { _ = b.srv.Close() }) }

// tally is what a stream of drill requests got.
type tally struct {
	mu          sync.Mutex
	sent        int
	status      map[string]int  // "200", "429", "error"
	retryAfter  int             // 429s and 503s with a whole-seconds Retry-After
	throttled   int             // 429s and 503s
	latencies   []time.Duration // of 200s
	refusedLat  []time.Duration // of 429s and 503s
	errExamples []string
}

func (t *tally) ok() int { return t.status["200"] }

// count sums the answers with status (any reason).
func (t *tally) count(status string) int {
	n := 0
	for k, v := range t.status {
		if k == status || strings.HasPrefix(k, status+" ") {
			n += v
		}
	}
	return n
}

func (t *tally) successRatio() float64 {
	if t.sent == 0 {
		return 0
	}
	return float64(t.ok()) / float64(t.sent)
}

// p99 of the successful requests' latencies, in milliseconds.
func (t *tally) p99() float64 { return p99(t.latencies) }

func p99(lat []time.Duration) float64 {
	if len(lat) == 0 {
		return 0
	}
	l := append([]time.Duration(nil), lat...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	i := (len(l)*99 + 99) / 100
	if i > len(l) {
		i = len(l)
	}
	return float64(l[i-1].Microseconds()) / 1000
}

func (t *tally) failures() int { return t.sent - t.ok() }

func (t *tally) summary() string {
	s := ""
	for _, k := range sortedKeys(t.status) {
		s += fmt.Sprintf(" %s=%d", k, t.status[k])
	}
	if len(t.errExamples) > 0 {
		s += fmt.Sprintf(" (first error: %s)", t.errExamples[0])
	}
	return s
}

// drive sends GETs to the drill route with key at rate per second for d
// (bounded by ctx), at most maxInflight at once, and tallies the answers.
// It returns within d plus requestTimeout.
// at, when set, is called once at half time.
func (e *env) drive(ctx context.Context, key string, rate int, d time.Duration, at func()) *tally {
	return e.driveTo(ctx, e.o.Prefix, key, rate, d, at)
}

// driveTo is drive to the route with path prefix prefix.
func (e *env) driveTo(ctx context.Context, prefix, key string, rate int, d time.Duration, at func()) *tally {
	t := &tally{status: map[string]int{}}
	n := int(float64(rate) * d.Seconds()) // bounded: rate <= MaxRate, d <= MaxDuration
	target := e.o.Data + prefix + "drill"
	sem := make(chan struct{}, maxInflight)
	var wg sync.WaitGroup
	start := time.Now()
	half := n / 2
	for i := 0; i < n; i++ {
		if i == half && at != nil {
			at()
		}
		due := start.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
		if w := time.Until(due); w > 0 {
			tm := time.NewTimer(w)
			select {
			case <-ctx.Done():
				tm.Stop()
			case <-tm.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		// The duration cap is hard: when levee answers slower than the
		// rate, what cannot start within d is not sent.
		if time.Since(start) >= d {
			break
		}
		stop := time.NewTimer(time.Until(start.Add(d)))
		sent := false
		select {
		case sem <- struct{}{}:
			sent = true
		case <-ctx.Done():
		case <-stop.C:
		}
		stop.Stop()
		if !sent {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			e.one(ctx, target, key, t)
		}()
	}
	wg.Wait()
	return t
}

func (e *env) one(ctx context.Context, target, key string, t *tally) {
	req, err := http.NewRequestWithContext(ctx, "GET", target, nil)
	if err != nil {
		return
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	begin := time.Now()
	resp, err := e.client.Do(req)
	var code string
	var retryAfter bool
	var reason []byte
	if err == nil {
		// A refusal's body is levee's {"error","reason"}: the first 4 KiB
		// are kept to name the reason.
		if resp.StatusCode >= 400 {
			reason, _ = io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		code = strconv.Itoa(resp.StatusCode)
		if resp.StatusCode == 429 || resp.StatusCode == 503 {
			s, perr := strconv.Atoi(resp.Header.Get("Retry-After"))
			retryAfter = perr == nil && s >= 0
		}
		if resp.StatusCode >= 400 && reason != nil {
			var doc struct {
				Reason string `json:"reason"`
			}
			if json.Unmarshal(reason, &doc) == nil && doc.Reason != "" {
				code += " " + doc.Reason
			}
		}
	} else {
		code = "error"
		if errors.Is(err, context.Canceled) {
			code = "cancelled"
		}
	}
	el := time.Since(begin)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent++
	t.status[code]++
	if strings.HasPrefix(code, "429") || strings.HasPrefix(code, "503") {
		t.throttled++
		t.refusedLat = append(t.refusedLat, el)
		if retryAfter {
			t.retryAfter++
		}
	}
	if code == "200" {
		t.latencies = append(t.latencies, el)
	}
	if err != nil && len(t.errExamples) < 3 {
		t.errExamples = append(t.errExamples, err.Error())
	}
}
