package discovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/levee-gw/levee/internal/testkit"
	"github.com/levee-gw/levee/internal/testsvc"
)

const testPrefix = "/levee/services/video/"

// etcdFixture is a fresh etcd and a client the test writes keys with.
type etcdFixture struct {
	e   *testsvc.Etcd
	cli *clientv3.Client
}

func startEtcd(t *testing.T) *etcdFixture {
	t.Helper()
	e := testsvc.StartEtcd(t)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{e.Endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		// Reconnect promptly after the tests restart etcd.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpcConnectParams(50*time.Millisecond, 500*time.Millisecond, 2*time.Second))},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &etcdFixture{e: e, cli: cli}
}

func (f *etcdFixture) put(t *testing.T, key, value string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := f.cli.Put(ctx, key, value)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return resp.Header.Revision
}

func (f *etcdFixture) del(t *testing.T, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := f.cli.Delete(ctx, key); err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
}

func (f *etcdFixture) source(t *testing.T, o EtcdOptions) *EtcdSource {
	t.Helper()
	o.Endpoints = []string{f.e.Endpoint}
	if o.Prefix == "" {
		o.Prefix = testPrefix
	}
	s, err := NewEtcdSource(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func inst(addr string) string { return fmt.Sprintf(`{"address": %q}`, addr) }

// waitFor polls cond every 10ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return testkit.Until(t, timeout, what, cond)
}

func TestEtcdSourceInitialStateWithBadKeys(t *testing.T) {
	checkLeaks(t)
	f := startEtcd(t)
	f.put(t, testPrefix+"a", inst("10.0.0.1:80"))
	f.put(t, testPrefix+"b", `{"address": "10.0.0.2:80", "weight": "abc"}`)
	f.put(t, testPrefix+"c", `{"address": "10.0.0.1:0080"}`) // the same address as a, spelled differently
	f.put(t, testPrefix+"d", `{"address": "10.0.0.4:80", "weight": "0"}`)
	f.put(t, testPrefix+"e", `not json`)
	f.put(t, "/levee/services/video-canary/x", inst("10.9.9.9:80")) // outside the prefix
	s := f.source(t, EtcdOptions{})
	if s.Connected() {
		t.Error("Connected before Run")
	}
	c := runSource(t, s)
	i, _ := c.waitEvent(t, 0, 10*time.Second, "with the initial state", func(ev Event) bool { return ev.Err == nil })
	evs, _ := c.snapshot()
	ev := evs[i]
	if !hasAddrs(ev, "10.0.0.1:80", "10.0.0.4:80") {
		t.Errorf("instances = %v, want 10.0.0.1:80 and the drained 10.0.0.4:80", addrs(ev))
	}
	if w := ev.Update.Instances[1].Weight; w != 0 {
		t.Errorf("weight \"0\" = %d, want 0 (drained)", w)
	}
	want := map[string]Reason{testPrefix + "b": ReasonNotANumber, testPrefix + "c": ReasonDuplicateAddress, testPrefix + "e": ReasonBadInstance}
	if len(ev.Update.Rejected) != len(want) {
		t.Errorf("Rejected = %+v, want %v", ev.Update.Rejected, want)
	}
	for _, r := range ev.Update.Rejected {
		if want[r.Key] != r.Reason {
			t.Errorf("rejected %s for %s, want %q", r.Key, r.Reason, want[r.Key])
		}
	}
	if ev.Source != "etcd:"+testPrefix {
		t.Errorf("Source = %q", ev.Source)
	}
	if !s.Connected() {
		t.Error("not Connected after the initial load")
	}
}

func TestEtcdSourcePutAndDelete(t *testing.T) {
	checkLeaks(t)
	f := startEtcd(t)
	f.put(t, testPrefix+"a", inst("10.0.0.1:80"))
	c := runSource(t, f.source(t, EtcdOptions{}))
	c.waitEvent(t, 0, 10*time.Second, "with the initial state", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80") })

	var lat []time.Duration
	for i := range 5 {
		n := c.count()
		start := time.Now()
		f.put(t, testPrefix+"b", fmt.Sprintf(`{"address": "10.0.0.2:80", "weight": %d}`, i+1))
		_, at := c.waitEvent(t, n, 5*time.Second, "after a PUT", func(ev Event) bool {
			return hasAddrs(ev, "10.0.0.1:80", "10.0.0.2:80") && ev.Update.Instances[1].Weight == uint32(100*(i+1))
		})
		lat = append(lat, at.Sub(start))
	}
	n := c.count()
	start := time.Now()
	f.del(t, testPrefix+"a")
	_, at := c.waitEvent(t, n, 5*time.Second, "after a DELETE", func(ev Event) bool { return hasAddrs(ev, "10.0.0.2:80") })
	t.Logf("PUT to delivery: %v (debounce %v); DELETE to delivery: %v", lat, DefaultEtcdDebounce, at.Sub(start))
}

func TestEtcdSourceBatchesQuickPuts(t *testing.T) {
	checkLeaks(t)
	f := startEtcd(t)
	// A long debounce so the batching does not depend on how fast the puts go.
	c := runSource(t, f.source(t, EtcdOptions{Debounce: 300 * time.Millisecond}))
	c.waitEvent(t, 0, 10*time.Second, "with the empty initial state", func(ev Event) bool { return ev.Err == nil && len(ev.Update.Instances) == 0 })
	const puts = 20
	var want []string
	for i := range puts {
		addr := fmt.Sprintf("10.0.1.%d:80", 10+i)
		f.put(t, fmt.Sprintf("%sk%02d", testPrefix, i), inst(addr))
		want = append(want, addr)
	}
	i, _ := c.waitEvent(t, 1, 10*time.Second, "with all the puts", func(ev Event) bool { return hasAddrs(ev, want...) })
	if i >= puts {
		t.Errorf("%d deliveries for %d puts, want fewer", i, puts)
	}
	t.Logf("%d puts delivered in %d deliveries", puts, i)
}

// A watch that starts from a compacted revision resyncs: a fresh load and a
// new watch, delivering the current state.
func TestEtcdSourceResyncsAfterCompaction(t *testing.T) {
	checkLeaks(t)
	f := startEtcd(t)
	f.put(t, testPrefix+"a", inst("10.0.0.1:80"))
	s := f.source(t, EtcdOptions{})
	// Hold the source between its first load and its watch while the
	// registry changes and is compacted past the loaded revision.
	release := make(chan struct{})
	var loads atomic.Int32
	s.beforeWatch = func(rev int64) {
		if loads.Add(1) == 1 {
			<-release
		}
	}
	c := runSource(t, s)
	c.waitEvent(t, 0, 10*time.Second, "with the initial state", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80") })
	f.put(t, testPrefix+"b", inst("10.0.0.2:80"))
	f.del(t, testPrefix+"a")
	rev := f.put(t, testPrefix+"c", inst("10.0.0.3:80"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := f.cli.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	close(release)
	_, _ = c.waitEvent(t, 1, 10*time.Second, "with the state after compaction", func(ev Event) bool { return hasAddrs(ev, "10.0.0.2:80", "10.0.0.3:80") })
	// The source delivers a load's state before it calls beforeWatch, so
	// the second call may come just after the delivery seen above.
	for deadline := time.Now().Add(5 * time.Second); loads.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := loads.Load(); n < 2 {
		t.Errorf("%d loads, want a second one after the compacted watch", n)
	}
	// The new watch works.
	n := c.count()
	f.put(t, testPrefix+"d", inst("10.0.0.4:80"))
	c.waitEvent(t, n, 5*time.Second, "after a PUT on the new watch", func(ev Event) bool {
		return hasAddrs(ev, "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80")
	})
}

func TestEtcdSourceDownAndRestarted(t *testing.T) {
	checkLeaks(t)
	f := startEtcd(t)
	f.put(t, testPrefix+"a", inst("10.0.0.1:80"))
	s := f.source(t, EtcdOptions{BackoffMax: 2 * time.Second})
	c := runSource(t, s)
	c.waitEvent(t, 0, 10*time.Second, "with the initial state", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80") })
	// A change seen proves the watch is established before etcd goes.
	f.put(t, testPrefix+"z", inst("10.0.0.26:80"))
	c.waitEvent(t, 1, 10*time.Second, "after a PUT", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80", "10.0.0.26:80") })
	f.del(t, testPrefix+"z")
	c.waitEvent(t, 2, 10*time.Second, "after a DELETE", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80") })

	n := c.count()
	f.e.Stop()
	down := waitFor(t, 10*time.Second, "Connected() false after etcd stopped", func() bool { return !s.Connected() })
	t.Logf("Connected() false %v after etcd stopped (probe every %v)", down, DefaultEtcdProbeInterval)
	// While etcd is down the source keeps retrying and delivers nothing;
	// give it several backoff rounds.
	time.Sleep(3 * time.Second)
	if got := c.count(); got != n {
		evs, _ := c.snapshot()
		t.Errorf("%d deliveries while etcd was down:%s", got-n, describe(evs[n:]))
	}

	start := time.Now()
	f.e.Restart(t)
	restarted := time.Since(start)
	i, at := c.waitEvent(t, n, 15*time.Second, "with the state after the restart", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80") })
	if !s.Connected() {
		t.Error("not Connected after delivering post-restart state")
	}
	t.Logf("etcd restart took %v; state delivered %v after etcd was ready", restarted, at.Sub(start)-restarted)

	m := c.count()
	f.put(t, testPrefix+"b", inst("10.0.0.2:80"))
	c.waitEvent(t, max(i+1, m), 5*time.Second, "after a PUT following the restart", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80", "10.0.0.2:80") })
}

func TestEtcdSourceTooManyKeys(t *testing.T) {
	checkLeaks(t)
	f := startEtcd(t)
	for i := range 4 {
		f.put(t, fmt.Sprintf("%sk%d", testPrefix, i), inst(fmt.Sprintf("10.0.0.%d:80", i+1)))
	}
	c := runSource(t, f.source(t, EtcdOptions{Limits: Limits{MaxInstances: 3}}))
	c.waitEvent(t, 0, 10*time.Second, "refusing four keys", func(ev Event) bool { return errors.Is(ev.Err, ErrTooLarge) })
	n := c.count()
	f.del(t, testPrefix+"k0")
	c.waitEvent(t, n, 10*time.Second, "with three keys", func(ev Event) bool { return hasAddrs(ev, "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80") })
	n = c.count()
	f.put(t, testPrefix+"k9", inst("10.0.0.9:80"))
	c.waitEvent(t, n, 10*time.Second, "refusing four keys again", func(ev Event) bool {
		var pe *PayloadError
		return errors.As(ev.Err, &pe) && pe.Code == CodeTooManyInstances
	})
}

func TestEtcdSourceAllRejected(t *testing.T) {
	checkLeaks(t)
	f := startEtcd(t)
	f.put(t, testPrefix+"a", `{"address": "10.0.0.1:80", "weight": "NaN"}`)
	c := runSource(t, f.source(t, EtcdOptions{}))
	i, _ := c.waitEvent(t, 0, 10*time.Second, "saying all were rejected", func(ev Event) bool { return errors.Is(ev.Err, ErrAllRejected) })
	evs, _ := c.snapshot()
	if r := evs[i].Update.Rejected; len(r) != 1 || r[0].Reason != ReasonNotFinite || r[0].Key != testPrefix+"a" {
		t.Errorf("Rejected = %+v", r)
	}
}

// With etcd unreachable from the start, Run neither delivers nor spins, and
// returns promptly when cancelled.
func TestEtcdSourceUnreachableFromStart(t *testing.T) {
	checkLeaks(t)
	s, err := NewEtcdSource(EtcdOptions{Endpoints: []string{"127.0.0.1:1"}, Prefix: testPrefix, RequestTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var loads atomic.Int32
	s.beforeWatch = func(int64) { loads.Add(1) }
	c := runSource(t, s)
	time.Sleep(time.Second) // a window for a wrong delivery to show up
	if c.count() != 0 || loads.Load() != 0 || s.Connected() {
		t.Errorf("deliveries %d, loads %d, connected %v; want none", c.count(), loads.Load(), s.Connected())
	}
}

func TestNewEtcdSourceRejectsBadOptions(t *testing.T) {
	ok := EtcdOptions{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/p/"}
	for name, tc := range map[string]struct {
		edit func(*EtcdOptions)
		want string
	}{
		"no endpoints":     {func(o *EtcdOptions) { o.Endpoints = nil }, "at least one"},
		"empty endpoint":   {func(o *EtcdOptions) { o.Endpoints = []string{" "} }, "endpoints[0]: empty"},
		"no prefix":        {func(o *EtcdOptions) { o.Prefix = "" }, "prefix"},
		"prefix without /": {func(o *EtcdOptions) { o.Prefix = "/p" }, `end in "/"`},
		"negative timeout": {func(o *EtcdOptions) { o.RequestTimeout = -1 }, "request timeout must be"},
		"min above max":    {func(o *EtcdOptions) { o.BackoffMin = 10 * time.Second }, "backoff min"},
		"bad limits":       {func(o *EtcdOptions) { o.Limits.MaxInstances = -1 }, "max instances"},
	} {
		t.Run(name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			_, err := NewEtcdSource(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if _, err := NewEtcdSource(ok); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

func TestBackoffStaysWithinBounds(t *testing.T) {
	b := backoff{min: 100 * time.Millisecond, max: 5 * time.Second}
	for round := range 3 {
		var last time.Duration
		for i := range 20 {
			d := b.next()
			if d < b.min || d > b.max {
				t.Fatalf("round %d wait %d = %v, outside [%v, %v]", round, i, d, b.min, b.max)
			}
			last = d
		}
		if last < b.max/2 {
			t.Errorf("after 20 waits the wait is %v, want it near the max %v", last, b.max)
		}
		b.reset()
		if d := b.next(); d > b.min {
			t.Errorf("after reset the wait is %v, want %v", d, b.min)
		}
		b.reset()
	}
}
