package clusterstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file is the membership: this node's key under a lease, kept alive,
// and the probe that counts the live nodes (and notices etcd gone).

// Join registers this node in the membership (at most once; the gateway
// knows its admin address, part of the default node id, only once it
// listens).
func (s *Store) Join(n Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.joined || s.closed {
		return
	}
	s.joined = true
	s.o.Node = n
	s.done.Add(1)
	go s.memberLoop()
}

// memberLoop registers this node (<prefix>nodes/<id>, leased LeaseTTL)
// and keeps the lease alive; when the lease is lost (etcd away longer than
// the TTL) it registers again, waiting backoffMin to backoffMax between
// attempts. At Close it revokes the lease, so the node leaves the list at
// once.
func (s *Store) memberLoop() {
	defer s.done.Done()
	ttl := int64(max(1, (s.o.LeaseTTL+time.Second-1)/time.Second))
	value, _ := json.Marshal(s.o.Node)
	wait := time.Duration(0)
	for {
		if wait > 0 && !s.pause(wait, nil, nil) {
			return
		}
		wait = nextBackoff(wait)
		ctx, cancel := context.WithTimeout(context.Background(), s.o.OpTimeout)
		lease, err := s.cli.Grant(ctx, ttl)
		if err == nil {
			_, err = s.cli.Put(ctx, s.key("nodes/", s.o.Node.ID), string(value), clientv3.WithLease(lease.ID))
		}
		cancel()
		if err != nil {
			continue
		}
		kctx, kcancel := context.WithCancel(context.Background())
		ka, err := s.cli.KeepAlive(kctx, lease.ID)
		if err != nil {
			kcancel()
			continue
		}
		wait = backoffMin
		closing := false
	alive:
		for {
			select {
			case <-s.stop:
				closing = true
				break alive
			case _, ok := <-ka:
				if !ok {
					break alive // lease expired or the client gave up: register again
				}
			}
		}
		kcancel()
		if closing {
			ctx, cancel := context.WithTimeout(context.Background(), s.o.OpTimeout)
			_, _ = s.cli.Revoke(ctx, lease.ID)
			cancel()
			return
		}
	}
}

// probeLoop lists the live nodes every probeEvery: the count the Redis
// fallback divides by, and the probe that marks etcd down or back (back:
// the watch re-reads the whole state).
func (s *Store) probeLoop() {
	defer s.done.Done()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.o.OpTimeout)
		nodes, err := s.Members(ctx)
		cancel()
		if err != nil {
			s.setUp(false, err.Error())
		} else {
			s.mu.Lock()
			s.nodes = max(1, len(nodes))
			s.mu.Unlock()
			if s.setUp(true, "") {
				for _, c := range []chan struct{}{s.resync, s.pushes.resync, s.dataSync} {
					select {
					case c <- struct{}{}:
					default:
					}
				}
			}
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// Members reads the live nodes from etcd, in id order, at most maxNodes
// (a value that is not a node is left out).
func (s *Store) Members(ctx context.Context) ([]Node, error) {
	resp, err := s.cli.Get(clientv3.WithRequireLeader(ctx), s.key("nodes/"), clientv3.WithPrefix(), clientv3.WithLimit(maxNodes))
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	out := make([]Node, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var n Node
		if len(kv.Value) > maxValueBytes || json.Unmarshal(kv.Value, &n) != nil || n.ID == "" {
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

// ReadyNote is /readyz's note while etcd does not answer (ready, but
// serving the shared apps as last seen); "" while it does.
func (s *Store) ReadyNote() string {
	if up, msg := s.Up(); !up {
		return "cluster.etcd unreachable (" + msg + "): apps, keys, data APIs and pushed endpoints serve as this node last saw them; admin writes and pushes to them answer 503"
	}
	return ""
}
