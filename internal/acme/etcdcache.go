package acme

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"golang.org/x/crypto/acme/autocert"
)

// EtcdOptions share the account and the certificates among the nodes of
// a cluster (cluster.etcd).
type EtcdOptions struct {
	Endpoints   []string
	Prefix      string        // the cluster's key prefix; keys are Prefix+"acme/"+key
	DialTimeout time.Duration // connecting
	OpTimeout   time.Duration // each read or write
}

// The cluster lock's bounds.
const (
	// lockTTL is the lease of a held lock: a node that dies holding one
	// frees it within lockTTL.
	lockTTL = 10 // seconds
	// lockWait bounds the wait for another node's lock; past it this node
	// orders anyway (both order: see etcdCache).
	lockWait = 2 * time.Minute
	// lockHold bounds how long a lock is held waiting for the Put of the
	// order it guards (an order that fails stores nothing).
	lockHold = 2 * time.Minute
)

// etcdCache is an autocert.Cache in etcd under Prefix+"acme/", every
// value also written to local (the node's state_dir copy), which answers
// while etcd does not. So that the nodes order a name's certificate once,
// a Get that finds a certificate missing or due for renewal (or the
// account key missing) takes a cluster lock on the key (an etcd mutex on
// a lease of its own) before it answers: another node holding it means
// that node is ordering, so this one waits for it (at most lockWait) and
// reads again, finding the other's certificate. The lock is held until
// the Put that stores the order's result, a failed order (release), or
// lockHold. If both nodes order anyway (etcd away, or a wait past
// lockWait), each stores its own certificate, the last Put is the shared
// one, and both certificates are valid: the cost is one extra order.
// The challenge tokens (keys with "+token" or "+http-01") are shared
// without a lock, so any node answers the CA's validation.
type etcdCache struct {
	o     EtcdOptions
	local autocert.Cache
	stale func(key string, data []byte) bool // a certificate due for renewal
	log   *slog.Logger

	mu   sync.Mutex
	cli  *clientv3.Client
	held map[string]*heldLock // by key; bounded by the domains and the account key
}

type heldLock struct {
	sess  *concurrency.Session
	timer *time.Timer
}

func newEtcdCache(o EtcdOptions, local autocert.Cache, stale func(string, []byte) bool, log *slog.Logger) *etcdCache {
	return &etcdCache{o: o, local: local, stale: stale, log: log, held: map[string]*heldLock{}}
}

// open connects (it does not wait for etcd: the client dials in the
// background; until then every call falls back to local).
func (c *etcdCache) open() error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.o.Endpoints, DialTimeout: c.o.DialTimeout, MaxUnaryRetries: 2,
		Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("acme: cluster.etcd: %w", err)
	}
	c.mu.Lock()
	c.cli = cli
	c.mu.Unlock()
	return nil
}

// close releases the locks held and closes the client.
func (c *etcdCache) close() {
	c.mu.Lock()
	cli := c.cli
	c.cli = nil
	held := c.held
	c.held = map[string]*heldLock{}
	c.mu.Unlock()
	for _, h := range held {
		h.timer.Stop()
		_ = h.sess.Close()
	}
	if cli != nil {
		_ = cli.Close()
	}
}

func (c *etcdCache) client() *clientv3.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cli
}

func (c *etcdCache) key(k string) string { return c.o.Prefix + "acme/" + k }

// isToken reports whether key is a challenge token's (shared unlocked).
func isToken(key string) bool {
	return strings.HasSuffix(key, "+token") || strings.HasSuffix(key, "+http-01")
}

// peek reads key from etcd (local when etcd does not answer) without the
// lock: for the expiry the Manager reports at start.
func (c *etcdCache) peek(ctx context.Context, key string) ([]byte, error) {
	data, err := c.read(ctx, key)
	if err != nil && !errors.Is(err, autocert.ErrCacheMiss) {
		return c.local.Get(ctx, key)
	}
	return data, err
}

// read is etcd's value of key, ErrCacheMiss when absent.
func (c *etcdCache) read(ctx context.Context, key string) ([]byte, error) {
	cli := c.client()
	if cli == nil {
		return nil, errors.New("acme: etcd not open")
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.OpTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, c.key(key))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, autocert.ErrCacheMiss
	}
	return resp.Kvs[0].Value, nil
}

func (c *etcdCache) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := c.read(ctx, key)
	if err != nil && !errors.Is(err, autocert.ErrCacheMiss) {
		c.log.Warn("acme: etcd does not answer; reading this node's copy", "key", key, "error", err)
		return c.local.Get(ctx, key)
	}
	if err == nil {
		_ = c.local.Put(ctx, key, data) // keep the fallback current
	}
	if isToken(key) || (err == nil && !c.stale(key, data)) || c.holds(key) {
		return data, err
	}
	// Missing or due: this node may order. Take the lock, then read
	// again: the holder before us may have stored it.
	if !c.lock(ctx, key) {
		return data, err
	}
	again, aerr := c.read(ctx, key)
	if aerr == nil && !c.stale(key, again) {
		c.release(key)
		_ = c.local.Put(ctx, key, again)
		return again, nil
	}
	return data, err
}

// holds reports whether this node holds key's lock.
func (c *etcdCache) holds(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[key] != nil
}

// lock takes key's cluster lock (waiting at most lockWait for another
// node's); false when etcd does not answer or the wait ran out.
func (c *etcdCache) lock(ctx context.Context, key string) bool {
	cli := c.client()
	if cli == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(lockTTL), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		c.log.Warn("acme: no cluster lock (etcd lease); ordering without it", "key", key, "error", err)
		return false
	}
	if err := concurrency.NewMutex(sess, c.key("lock/"+key)).Lock(ctx); err != nil {
		_ = sess.Close()
		c.log.Warn("acme: no cluster lock within the wait; ordering without it", "key", key, "error", err)
		return false
	}
	h := &heldLock{sess: sess}
	h.timer = time.AfterFunc(lockHold, func() { c.release(key) })
	c.mu.Lock()
	if c.cli == nil || c.held[key] != nil { // closed meanwhile, or a concurrent Get of ours took it
		c.mu.Unlock()
		h.timer.Stop()
		_ = sess.Close()
		return c.holds(key)
	}
	c.held[key] = h
	c.mu.Unlock()
	return true
}

// release frees key's lock if this node holds it (closing its session
// revokes the lease, which deletes the lock key).
func (c *etcdCache) release(key string) {
	c.mu.Lock()
	h := c.held[key]
	delete(c.held, key)
	c.mu.Unlock()
	if h != nil {
		h.timer.Stop()
		_ = h.sess.Close()
	}
}

func (c *etcdCache) Put(ctx context.Context, key string, data []byte) error {
	lerr := c.local.Put(ctx, key, data)
	defer c.release(key)
	cli := c.client()
	if cli == nil {
		return lerr
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.OpTimeout)
	defer cancel()
	if _, err := cli.Put(ctx, c.key(key), string(data)); err != nil {
		c.log.Warn("acme: etcd does not answer; kept on this node only", "key", key, "error", err)
		return lerr
	}
	return nil
}

func (c *etcdCache) Delete(ctx context.Context, key string) error {
	lerr := c.local.Delete(ctx, key)
	cli := c.client()
	if cli == nil {
		return lerr
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.OpTimeout)
	defer cancel()
	if _, err := cli.Delete(ctx, c.key(key)); err != nil {
		return err
	}
	return lerr
}
