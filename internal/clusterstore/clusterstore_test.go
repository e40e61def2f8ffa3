package clusterstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/testkit"
	"github.com/levee-gw/levee/internal/testsvc"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open opens a store on e with its state file in dir.
func open(t *testing.T, e *testsvc.Etcd, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Endpoints: []string{e.Endpoint}, Prefix: "/t/", LeaseTTL: 2 * time.Second,
		DialTimeout: 500 * time.Millisecond, OpTimeout: time.Second, StateFile: filepath.Join(dir, "cluster-apps.json")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// eventually polls cond every 10 ms until it holds or 10 s pass (a
// bounded deadline, not a judgment of speed) and returns how long it took.
func eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	return testkit.Until(t, 10*time.Second, what, cond)
}

func digest(t *testing.T, nk apps.NewKey) [32]byte {
	t.Helper()
	var sum [32]byte
	b, err := hex.DecodeString(nk.SHA256)
	if err != nil || len(b) != 32 {
		t.Fatalf("key digest %q", nk.SHA256)
	}
	copy(sum[:], b)
	return sum
}

// TestSharedAppsPropagate: an app and key created through one store are
// admitted by the two others; revoked through the third, refused by the
// first two; the file seeds once whichever store seeds first.
func TestSharedAppsPropagate(t *testing.T) {
	e := testsvc.StartEtcd(t)
	nodes := []*Store{open(t, e, t.TempDir()), open(t, e, t.TempDir()), open(t, e, t.TempDir())}
	ctx := context.Background()
	if _, err := nodes[0].Create(ctx, apps.Spec{ID: "shop", Grants: []string{"api"}}); err != nil {
		t.Fatal(err)
	}
	nk, err := nodes[0].CreateKey(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	sum := digest(t, nk)
	if _, _, err := nodes[0].Current().Authenticate(sum); err != nil {
		t.Fatalf("node 1 does not admit its own new key at once: %v", err)
	}
	for i, n := range nodes[1:] {
		d := eventually(t, fmt.Sprintf("node %d admitting the key", i+2), func() bool {
			_, _, err := n.Current().Authenticate(sum)
			return err == nil
		})
		t.Logf("key created on node 1 admitted by node %d after %v", i+2, d)
	}
	if _, err := nodes[2].RevokeKey(ctx, "shop", nk.ID); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes[:2] {
		d := eventually(t, fmt.Sprintf("node %d refusing the key", i+1), func() bool {
			_, _, err := n.Current().Authenticate(sum)
			return errors.Is(err, apps.ErrUnknownKey)
		})
		t.Logf("key revoked on node 3 refused by node %d after %v", i+1, d)
	}
	// Concurrent writes from every node: none is lost.
	errs := make(chan error, 3)
	for i, n := range nodes {
		go func() {
			_, err := n.Patch(ctx, "shop", apps.Patch{Name: ptr(fmt.Sprint("name-", i))})
			if err == nil {
				_, err = n.Create(ctx, apps.Spec{ID: fmt.Sprint("app-", i)})
			}
			errs <- err
		}()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range nodes {
		eventually(t, fmt.Sprintf("node %d holding 4 apps", i+1), func() bool { return n.Current().Len() == 4 })
	}
	// Seeding: two nodes seed the same file; it is applied once.
	sha := apps.HashKey("file-key")
	file := []apps.FileApp{{Spec: apps.Spec{ID: "filed", Grants: []string{"api"}}, KeySHA256: []string{sha}}}
	r1, err := nodes[0].Seed(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := nodes[1].Seed(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Created) != 1 || len(r2.Unchanged) != 1 || len(r2.Created) != 0 {
		t.Fatalf("seeding twice: %+v then %+v; want created once, then unchanged", r1, r2)
	}
	// A runtime change wins over the file's next change (docs/apps.md).
	if _, err := nodes[2].Patch(ctx, "filed", apps.Patch{Name: ptr("runtime")}); err != nil {
		t.Fatal(err)
	}
	file[0].Name = "from the file"
	r3, err := nodes[1].Seed(ctx, file)
	if err != nil || len(r3.KeptRuntime) != 1 {
		t.Fatalf("seeding a changed file over a runtime change: %+v, %v; want kept_runtime", r3, err)
	}
	eventually(t, "node 3 seeing the pending file change", func() bool {
		a, ok := nodes[2].Current().App("filed")
		return ok && a.Name == "runtime" && a.PendingFileChange
	})
}

func ptr[T any](v T) *T { return &v }

// TestEtcdOutage: with etcd stopped, writes fail with ErrUnavailable and
// change nothing, the snapshot keeps serving, and a store opened then
// serves the state saved on disk; once etcd is back, a change made
// through one store reaches every store, the one opened during the
// outage included.
func TestEtcdOutage(t *testing.T) {
	e := testsvc.StartEtcd(t)
	dirA := t.TempDir()
	a, b := open(t, e, dirA), open(t, e, t.TempDir())
	ctx := context.Background()
	if _, err := a.Create(ctx, apps.Spec{ID: "shop"}); err != nil {
		t.Fatal(err)
	}
	nk, err := a.CreateKey(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	sum := digest(t, nk)
	eventually(t, "b admitting the key", func() bool { _, _, err := b.Current().Authenticate(sum); return err == nil })
	a.Close()
	e.Stop()
	eventually(t, "b noticing etcd gone", func() bool { up, _ := b.Up(); return !up })
	if _, err := b.RevokeKey(ctx, "shop", nk.ID); !errors.Is(err, apps.ErrUnavailable) {
		t.Fatalf("revoking with etcd down: %v, want ErrUnavailable", err)
	}
	if _, _, err := b.Current().Authenticate(sum); err != nil {
		t.Fatalf("b stopped admitting the key during the outage: %v", err)
	}
	// A node restarted while etcd is down serves its last snapshot.
	a2 := open(t, e, dirA)
	if _, _, err := a2.Current().Authenticate(sum); err != nil {
		t.Fatalf("a node restarted with etcd down does not serve its saved state: %v", err)
	}
	e.Restart(t)
	eventually(t, "b reaching etcd again", func() bool { up, _ := b.Up(); return up })
	if _, err := b.RevokeKey(ctx, "shop", nk.ID); err != nil {
		t.Fatal(err)
	}
	d := eventually(t, "a2 refusing the key revoked after etcd returned", func() bool {
		_, _, err := a2.Current().Authenticate(sum)
		return errors.Is(err, apps.ErrUnknownKey)
	})
	t.Logf("revocation after etcd returned reached the node restarted during the outage after %v", d)
}

// TestWatchCompacted: a store whose watch was compacted away (its
// revision gone) re-reads the whole state and carries on.
func TestWatchCompacted(t *testing.T) {
	e := testsvc.StartEtcd(t)
	a, b := open(t, e, t.TempDir()), open(t, e, t.TempDir())
	ctx := context.Background()
	for i := range 5 {
		if _, err := a.Create(ctx, apps.Spec{ID: fmt.Sprint("app-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "b holding 5 apps", func() bool { return b.Current().Len() == 5 })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	b.mu.Lock()
	old := b.rev
	b.mu.Unlock()
	// Changes b will have to catch up on, then compact past them and make
	// b's watch start again from its old revision.
	if err := a.Delete(ctx, "app-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(ctx, apps.Spec{ID: "app-5"}); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/t/state/version")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	// A watch from before the compaction ends at once (ErrCompacted)
	// and asks for a full read; b's own loop then re-reads too.
	f := &follower{what: "test", prefix: b.key("state/"), events: func([]*clientv3.Event, int64) {}}
	if !b.watch(f, old) {
		t.Fatal("watch reported closing")
	}
	eventually(t, "b holding apps 1 to 5 after the compaction", func() bool {
		_, gone := b.Current().App("app-0")
		_, added := b.Current().App("app-5")
		return b.Current().Len() == 5 && !gone && added
	})
}

// TestMembership: three stores joined are listed; one closed leaves the
// list, and one whose lease is not kept alive leaves it once the lease
// expires.
func TestMembership(t *testing.T) {
	e := testsvc.StartEtcd(t)
	nodes := []*Store{open(t, e, t.TempDir()), open(t, e, t.TempDir()), open(t, e, t.TempDir())}
	for i, n := range nodes {
		n.Join(Node{ID: fmt.Sprint("node-", i+1), Version: "test", Admin: "127.0.0.1:1", Since: time.Now().UTC()})
	}
	for i, n := range nodes {
		eventually(t, fmt.Sprintf("node %d counting 3 nodes", i+1), func() bool { return n.Nodes() == 3 })
	}
	ms, err := nodes[0].Members(context.Background())
	if err != nil || len(ms) != 3 || ms[0].ID != "node-1" || ms[2].ID != "node-3" || ms[1].Version != "test" {
		t.Fatalf("members %+v, %v", ms, err)
	}
	nodes[2].Close()
	eventually(t, "node 1 counting 2 nodes", func() bool { return nodes[0].Nodes() == 2 })
	// A node that dies does not revoke its lease: its connection just
	// goes. It leaves the list once the lease (2 s here) expires.
	nodes[1].cli.Close()
	d := eventually(t, "node 1 counting 1 node after node 2 died", func() bool { return nodes[0].Nodes() == 1 })
	t.Logf("a node whose connection died left the list after %v (lease_ttl 2s)", d)
}
