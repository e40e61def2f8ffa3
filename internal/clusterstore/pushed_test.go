package clusterstore

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/testsvc"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// recorder is a PushHandler that keeps what it was handed, in order.
type recorder struct {
	wanted []string
	mu     sync.Mutex
	calls  []string // "push up rev body" or "confirm up rev"
	revs   map[string]int64
}

func (r *recorder) Wanted() []string { return r.wanted }

func (r *recorder) Pushed(up string, rev int64, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.revs == nil {
		r.revs = map[string]int64{}
	}
	r.revs[up] = rev
	r.calls = append(r.calls, "push "+up+" "+string(body))
}

func (r *recorder) Confirmed(up string, pushRev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.revs[up] == pushRev {
		r.calls = append(r.calls, "confirm "+up)
	} else {
		r.calls = append(r.calls, "confirm "+up+" of another push")
	}
}

func (r *recorder) has(call string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.calls, call)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// TestSharedPushes: a push stored through one store reaches another's
// handler, only for the upstreams it wants; a confirmation of a replaced
// push is refused, of the last one delivered after it; a store opened
// later reads push then confirmation; a value levee does not write is
// left out; a push too large or made while etcd is down is refused, and
// one made once etcd is back is delivered.
func TestSharedPushes(t *testing.T) {
	e := testsvc.StartEtcd(t)
	ctx := context.Background()
	a, b := open(t, e, t.TempDir()), open(t, e, t.TempDir())
	ra, rb := &recorder{wanted: []string{"up1", "up2"}}, &recorder{wanted: []string{"up1"}}
	stopA, stopB := a.FollowPushes(ra), b.FollowPushes(rb)
	defer stopA()
	defer stopB()

	rev1, err := a.PutPush(ctx, "up1", []byte(`[1]`))
	if err != nil {
		t.Fatal(err)
	}
	d := eventually(t, "b handed the push", func() bool { return rb.has("push up1 [1]") })
	t.Logf("a push stored through a reached b's handler after %v", d)
	if _, err := a.PutPush(ctx, "up2", []byte(`[2]`)); err != nil {
		t.Fatal(err)
	}
	rev3, err := a.PutPush(ctx, "up1", []byte(`[3]`))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "b handed the second push", func() bool { return rb.has("push up1 [3]") })
	eventually(t, "a handed the push to up2", func() bool { return ra.has("push up2 [2]") })
	if rb.has("push up2 [2]") {
		t.Error("b was handed a push to an upstream it does not want")
	}
	if err := b.PutConfirm(ctx, "up1", rev1); !errors.Is(err, ErrPushReplaced) {
		t.Errorf("confirming a replaced push: %v, want ErrPushReplaced", err)
	}
	if err := b.PutConfirm(ctx, "up1", rev3); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a handed the confirmation", func() bool { return ra.has("confirm up1") })

	// Values levee does not write are left out.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for k, v := range map[string]string{"/t/endpoints/up3/confirmed": "07", "/t/endpoints/up1/x": "[]", "/t/endpoints/up1/confirmed/confirmed": "1"} {
		if _, err := cli.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}

	// A store opened now reads the push, then its confirmation.
	c := open(t, e, t.TempDir())
	rc := &recorder{wanted: []string{"up1", "up3"}}
	stopC := c.FollowPushes(rc)
	defer stopC()
	eventually(t, "c handed the confirmation", func() bool { return rc.has("confirm up1") })
	if got := rc.list(); len(got) != 2 || got[0] != "push up1 [3]" {
		t.Errorf("c was handed %q, want the push then its confirmation", got)
	}

	if _, err := a.PutPush(ctx, "up1", bytes.Repeat([]byte(" "), MaxPushBytes+1)); !errors.Is(err, ErrPushTooLarge) {
		t.Errorf("a push over MaxPushBytes: %v", err)
	}
	e.Stop()
	eventually(t, "a noticing etcd gone", func() bool { up, _ := a.Up(); return !up })
	if _, err := a.PutPush(ctx, "up1", []byte(`[4]`)); !errors.Is(err, apps.ErrUnavailable) {
		t.Errorf("a push while etcd is down: %v, want apps.ErrUnavailable", err)
	}
	if err := a.PutConfirm(ctx, "up1", rev3); !errors.Is(err, apps.ErrUnavailable) {
		t.Errorf("a confirmation while etcd is down: %v, want apps.ErrUnavailable", err)
	}
	e.Restart(t)
	eventually(t, "a reaching etcd again", func() bool { up, _ := a.Up(); return up })
	if _, err := a.PutPush(ctx, "up1", []byte(`[5]`)); err != nil {
		t.Fatal(err)
	}
	d = eventually(t, "b handed the push made after the outage", func() bool { return rb.has("push up1 [5]") })
	t.Logf("a push made after etcd returned reached b's handler after %v", d)
	for _, call := range append(rb.list(), rc.list()...) {
		// (A re-read hands the standing confirmation of an older push
		// too: the handler compares revisions and ignores it.)
		if strings.Contains(call, "[4]") {
			t.Errorf("handed %q", call)
		}
	}
}

// TestSharedCap: Shared keeps the first MaxPushUpstreams names by name.
func TestSharedCap(t *testing.T) {
	var names []string
	for i := range MaxPushUpstreams + 5 {
		names = append(names, string(rune('a'+i%26))+strings.Repeat("x", i/26))
	}
	got := Shared(names)
	if len(got) != MaxPushUpstreams || !slices.IsSorted(got) {
		t.Fatalf("Shared kept %d names (sorted %v)", len(got), slices.IsSorted(got))
	}
	if len(Shared([]string{"b", "a"})) != 2 {
		t.Fatal("Shared dropped names under the cap")
	}
}
