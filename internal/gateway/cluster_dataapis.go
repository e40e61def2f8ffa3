package gateway

import (
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/levee-gw/levee/internal/clusterstore"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/dataapis"
)

// This file wires the data-API store of cluster.etcd (docs/cluster.md,
// "Data APIs"): the store lives in etcd (clusterstore.DataAPIs), every
// node follows it with a watch and rebuilds its table from each change
// (off the watch's goroutine: the applier below), compiles what it
// receives against its own file (a published version it cannot compile
// is not served here: the version it served before keeps serving,
// dataapis.Fleet), and reports what it serves under its lease.

// sharedDataAPIsFile is the last shared data-API state, under state_dir:
// what a node serves when etcd does not answer at start.
const sharedDataAPIsFile = "cluster-data-apis.json"

// fleetState is the gateway's part of the shared store: the versions
// served before, the statuses reported (for the metrics), the store.
type fleetState struct {
	mu     sync.Mutex
	shared *clusterstore.DataAPIs // nil without cluster.etcd
	fleet  dataapis.Fleet
	status []dataapis.NodeStatus
}

// sharedDataAPIs is the shared store with the applier that rebuilds the
// table after each change the watch applies.
type sharedDataAPIs struct {
	*clusterstore.DataAPIs
	g    *Gateway
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// openSharedDataAPIs opens the data-API store of cluster.etcd on the
// gateway's etcd store (openSharedApps opened it); nil, nil when there is
// none.
func (g *Gateway) openSharedDataAPIs(cfg *config.Config) (dataapis.Backend, error) {
	es := g.etcd.store.Load()
	if cfg.Cluster == nil || cfg.Cluster.Etcd == nil || es == nil {
		return nil, nil
	}
	sd := &sharedDataAPIs{g: g, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	d, err := es.OpenDataAPIs(clusterstore.DataAPIOptions{
		StateFile: filepath.Join(cfg.StateDir, sharedDataAPIsFile),
		OnChange: func(*dataapis.Snapshot) {
			select {
			case sd.kick <- struct{}{}:
			default: // a rebuild is due already; it reads the latest snapshot
			}
		},
	})
	if err != nil {
		return nil, err
	}
	sd.DataAPIs = d
	g.fleet.mu.Lock()
	g.fleet.shared = d
	g.fleet.mu.Unlock()
	go sd.applier()
	return sd, nil
}

// applier rebuilds the table after each change the watch applied, once
// the gateway serves from this store (before Start has finished, Start
// builds the table itself).
func (sd *sharedDataAPIs) applier() {
	defer close(sd.done)
	for {
		select {
		case <-sd.stop:
			return
		case <-sd.kick:
			sd.g.mu.Lock()
			live := sd.g.dataAPIs.store == dataapis.Backend(sd)
			sd.g.mu.Unlock()
			if live {
				_ = sd.g.applyDataAPIs(sd)
			}
		}
	}
}

// Close stops the applier, then the store.
func (sd *sharedDataAPIs) Close() error {
	sd.once.Do(func() {
		close(sd.stop)
		<-sd.done
	})
	sd.g.fleet.mu.Lock()
	if sd.g.fleet.shared == sd.DataAPIs {
		sd.g.fleet.shared = nil
	}
	sd.g.fleet.mu.Unlock()
	return sd.DataAPIs.Close()
}

// servingConfig is effectiveConfig for this node: with cluster.etcd, a
// published version this node cannot compile is replaced by the one it
// served before (dataapis.Fleet), and what it serves is reported.
func (g *Gateway) servingConfig(file *config.Config, snap *dataapis.Snapshot) (*config.Config, []string) {
	g.fleet.mu.Lock()
	defer g.fleet.mu.Unlock()
	if g.fleet.shared == nil || snap == nil {
		return g.effectiveConfig(file, snap)
	}
	snap, sts := g.fleet.fleet.Resolve(snap, func(name string, def []byte) error {
		_, err := g.dataAPIs.parsed.Parse(file, name, def)
		return err
	})
	eff, problems := g.effectiveConfig(file, snap)
	in := make(map[string]bool, len(eff.Routes))
	for _, r := range eff.Routes {
		in[r.Name] = true
	}
	gone := map[string]string{}
	for _, sv := range snap.Serving {
		if !in[sv.Name] {
			gone[sv.Name] = "version " + strconv.Itoa(sv.Version) + " collides with a route that serves here"
		}
	}
	sts = dataapis.Left(sts, gone)
	g.fleet.status = sts
	g.fleet.shared.ReportStatus(sts)
	return eff, problems
}

// fleetStatus is the fleet collector's view: this node's statuses and
// compile failures (none without cluster.etcd).
func (g *Gateway) fleetStatus() ([]dataapis.NodeStatus, map[string]uint64) {
	g.fleet.mu.Lock()
	defer g.fleet.mu.Unlock()
	if g.fleet.shared == nil {
		return nil, nil
	}
	return g.fleet.status, g.fleet.fleet.Failures()
}

// setFleetNode names this node in its statuses once its id is known.
func (g *Gateway) setFleetNode(id string) {
	g.fleet.mu.Lock()
	defer g.fleet.mu.Unlock()
	g.fleet.fleet.Node = id
	// A new slice: the one reported is being written to etcd.
	sts := slices.Clone(g.fleet.status)
	for i := range sts {
		sts[i].Node = id
	}
	g.fleet.status = sts
	if g.fleet.shared != nil {
		g.fleet.shared.ReportStatus(sts)
	}
}
