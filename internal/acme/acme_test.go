package acme

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
	"github.com/levee-gw/levee/internal/testsvc"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/acme/autocert"
)

// certPEM is autocert's cache format of a certificate for name expiring
// at notAfter: the key, then the leaf.
func certPEM(t *testing.T, name string, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: notAfter.Add(-90 * 24 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return append(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
}

func newTestManager(t *testing.T, now func() time.Time, o Options) (*Manager, *Metrics) {
	t.Helper()
	metrics, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	o.Directory, o.Domains, o.Now = "https://127.0.0.1:1/dir", []string{"a.test", "b.test"}, now
	if o.RenewBefore == 0 {
		o.RenewBefore = 30 * 24 * time.Hour
	}
	if o.Cache == nil && o.Dir == "" {
		o.Dir = t.TempDir()
	}
	m, err := New(o, metrics)
	if err != nil {
		t.Fatal(err)
	}
	return m, metrics
}

// TestHostPolicy: an HTTP-01 request's Host with a port (a CA validating
// on a port other than 80) or a trailing dot is admitted for a domain;
// another name is not.
func TestHostPolicy(t *testing.T) {
	m, _ := newTestManager(t, time.Now, Options{})
	for _, h := range []string{"a.test", "a.test:5002", "A.TEST.", "b.test:80"} {
		if err := m.hostPolicy(context.Background(), h); err != nil {
			t.Errorf("%q refused: %v", h, err)
		}
	}
	for _, h := range []string{"c.test", "c.test:80", "", "a.test.evil"} {
		if err := m.hostPolicy(context.Background(), h); err == nil {
			t.Errorf("%q admitted", h)
		}
	}
}

// TestWatchCacheCounts: a domain's certificate stored is counted issued,
// then renewed; a TLS-ALPN-01 token certificate ("<domain>+token") and
// the account key are neither counted nor reported as an expiry.
func TestWatchCacheCounts(t *testing.T) {
	m, metrics := newTestManager(t, time.Now, Options{})
	ctx := context.Background()
	exp := time.Now().Add(90 * 24 * time.Hour).Truncate(time.Second)
	for _, kv := range []struct {
		key  string
		data []byte
	}{
		{"a.test+token", certPEM(t, "a.test", exp.Add(time.Hour))},
		{"acme_account+key", []byte("-----BEGIN EC PRIVATE KEY-----\n-----END EC PRIVATE KEY-----\n")},
		{"a.test", certPEM(t, "a.test", exp)},
		{"a.test", certPEM(t, "a.test", exp.Add(24*time.Hour))},
	} {
		if err := m.cache.Put(ctx, kv.key, kv.data); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(metrics.stored.WithLabelValues("issued")); got != 1 {
		t.Fatalf("issued %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.stored.WithLabelValues("renewed")); got != 1 {
		t.Fatalf("renewed %v, want 1", got)
	}
	seen := map[string]time.Time{}
	m.Entries(func(name string, notAfter time.Time) bool { seen[name] = notAfter; return true })
	if len(seen) != 1 || !seen["a.test"].Equal(exp.Add(24*time.Hour)) {
		t.Fatalf("entries %v, want a.test at %s only", seen, exp.Add(24*time.Hour))
	}
}

// TestRenewalOverdue: with renew_before 30 days a certificate counts as
// overdue 30 days + 10 minutes (the attempt's grace) + 1 hour (autocert's
// largest jitter) before its expiry, not a second earlier; it is counted
// once, again 30 minutes later while still old, and no more once a newer
// certificate is stored.
func TestRenewalOverdue(t *testing.T) {
	m, metrics := newTestManager(t, time.Now, Options{})
	notAfter := time.Date(2030, 1, 31, 0, 0, 0, 0, time.UTC)
	if err := m.cache.Put(context.Background(), "a.test", certPEM(t, "a.test", notAfter)); err != nil {
		t.Fatal(err)
	}
	overdue := func() float64 { return testutil.ToFloat64(metrics.errors.WithLabelValues("a.test", "renewal_overdue")) }
	due := notAfter.Add(-30 * 24 * time.Hour).Add(time.Hour + 10*time.Minute)
	steps := []struct {
		at   time.Time
		want float64
	}{
		{due.Add(-time.Second), 0},
		{due, 1},
		{due.Add(29 * time.Minute), 1},
		{due.Add(30 * time.Minute), 2},
	}
	for _, s := range steps {
		m.checkRenewals(s.at)
		if got := overdue(); got != s.want {
			t.Fatalf("at %s: renewal_overdue %v, want %v", s.at, got, s.want)
		}
	}
	if err := m.cache.Put(context.Background(), "a.test", certPEM(t, "a.test", notAfter.Add(60*24*time.Hour))); err != nil {
		t.Fatal(err)
	}
	m.checkRenewals(due.Add(2 * time.Hour))
	if got := overdue(); got != 2 {
		t.Fatalf("after the renewal: renewal_overdue %v, want still 2", got)
	}
	if got := testutil.ToFloat64(metrics.errors.WithLabelValues("b.test", "renewal_overdue")); got != 0 {
		t.Fatalf("b.test (no certificate) counted %v", got)
	}
	if overdueAfter(16*time.Second) != 1600*time.Millisecond+4*time.Second || checkEvery(16*time.Second) != time.Second {
		t.Fatalf("overdueAfter(16s) %v, checkEvery(16s) %v", overdueAfter(16*time.Second), checkEvery(16*time.Second))
	}
}

// TestEtcdCacheLockAndFallback: two nodes' caches on one real etcd. Node
// A's Get of a missing certificate takes the name's lock; node B's Get
// waits for it and, once A stores its certificate, returns A's (so B
// orders nothing). A token is read without a lock. With etcd killed,
// each node reads its own state_dir copy.
func TestEtcdCacheLockAndFallback(t *testing.T) {
	e := testsvc.StartEtcd(t)
	now := time.Now
	opts := func() Options {
		return Options{Dir: t.TempDir(), Etcd: &EtcdOptions{Endpoints: []string{e.Endpoint}, Prefix: "/t/", DialTimeout: time.Second, OpTimeout: time.Second}}
	}
	a, _ := newTestManager(t, now, opts())
	b, _ := newTestManager(t, now, opts())
	for _, m := range []*Manager{a, b} {
		if err := m.etcd.open(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.etcd.close)
	}
	ctx := context.Background()
	if _, err := a.etcd.Get(ctx, "a.test"); !errors.Is(err, autocert.ErrCacheMiss) {
		t.Fatalf("A's first Get: %v, want a miss", err)
	}
	if !a.etcd.holds("a.test") {
		t.Fatal("A does not hold a.test's lock after a miss")
	}
	if _, err := b.etcd.Get(ctx, "a.test+token"); !errors.Is(err, autocert.ErrCacheMiss) {
		t.Fatalf("B's token Get: %v, want a miss without waiting", err)
	}
	var got []byte
	var gerr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, gerr = b.etcd.Get(ctx, "a.test")
	}()
	// B waits on the lock: its waiter key is there beside A's.
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		resp, err := a.etcd.client().Get(ctx, "/t/acme/lock/a.test", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return false, err.Error()
		}
		return resp.Count == 2, fmt.Sprintf("%d lock keys", resp.Count)
	})
	cert := certPEM(t, "a.test", time.Now().Add(90*24*time.Hour))
	if err := a.etcd.Put(ctx, "a.test", cert); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if gerr != nil || string(got) != string(cert) {
		t.Fatalf("B's Get: %v (%d bytes), want A's certificate", gerr, len(got))
	}
	if a.etcd.holds("a.test") || b.etcd.holds("a.test") {
		t.Fatal("a lock is still held after the certificate is stored")
	}

	e.Kill()
	for name, m := range map[string]*Manager{"A": a, "B": b} {
		data, err := m.etcd.Get(ctx, "a.test")
		if err != nil || string(data) != string(cert) {
			t.Fatalf("%s with etcd away: %v, want its local copy", name, err)
		}
	}
}
