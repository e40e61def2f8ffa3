package clusterstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/levee-gw/levee/internal/dataapis"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file is what each node serves of the shared data APIs: reported by
// the gateway after each rebuild, written under this node's own lease to
// P data-api-nodes/<node id>, read back by Get (dataapis.go).

// ReportStatus records what this node serves of each data API (at most
// MaxAPIs entries); the status loop writes it to etcd under this node's
// lease, the latest report only.
func (d *DataAPIs) ReportStatus(sts []dataapis.NodeStatus) {
	if len(sts) > dataapis.MaxAPIs {
		sts = sts[:dataapis.MaxAPIs]
	}
	d.mu.Lock()
	d.status = sts
	d.mu.Unlock()
	select {
	case d.statusCh <- struct{}{}:
	default:
	}
}

// statusLoop writes this node's status (P data-api-nodes/<node>) under a
// lease of LeaseTTL kept alive, so a node that is gone leaves the list;
// it writes again after each report, when the lease is lost and when etcd
// comes back, waiting backoffMin to backoffMax between failed attempts.
// At Close it revokes the lease.
func (d *DataAPIs) statusLoop() {
	defer d.done.Done()
	ttl := int64(max(1, (d.s.o.LeaseTTL+time.Second-1)/time.Second))
	var (
		lease   clientv3.LeaseID
		alive   <-chan *clientv3.LeaseKeepAliveResponse
		kcancel context.CancelFunc = func() {}
		dirty   bool
		wait    time.Duration
	)
	defer func() {
		kcancel()
		if lease != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), d.s.o.OpTimeout)
			_, _ = d.s.cli.Revoke(ctx, lease)
			cancel()
		}
	}()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		if dirty {
			if err := d.putStatus(&lease, &alive, &kcancel, ttl); err != nil {
				wait = nextBackoff(wait)
				retry.Reset(wait)
			} else {
				dirty, wait = false, 0
			}
		}
		select {
		case <-d.quit:
			return
		case <-d.s.stop:
			return
		case <-d.statusCh:
			dirty = true
		case _, ok := <-alive:
			if !ok { // lease expired or the client gave up: register again
				kcancel()
				lease, alive, dirty = 0, nil, true
			}
		case <-retry.C:
		}
	}
}

// putStatus writes the status under the lease, granting one first when
// there is none.
func (d *DataAPIs) putStatus(lease *clientv3.LeaseID, alive *<-chan *clientv3.LeaseKeepAliveResponse, kcancel *context.CancelFunc, ttl int64) error {
	d.mu.Lock()
	value, err := json.Marshal(d.status)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	d.s.mu.Lock()
	node := d.s.o.Node.ID
	d.s.mu.Unlock()
	if node == "" {
		return errors.New("not joined yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.s.o.OpTimeout)
	defer cancel()
	if *lease == 0 {
		l, err := d.s.cli.Grant(ctx, ttl)
		if err != nil {
			return err
		}
		kctx, kc := context.WithCancel(context.Background())
		ka, err := d.s.cli.KeepAlive(kctx, l.ID)
		if err != nil {
			kc()
			return err
		}
		*lease, *alive, *kcancel = l.ID, ka, kc
	}
	_, err = d.s.cli.Put(ctx, d.s.key("data-api-nodes/", node), string(value), clientv3.WithLease(*lease))
	return err
}
