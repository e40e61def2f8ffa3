package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/dataapis"
	"github.com/levee-gw/levee/internal/proxy"
)

// This file wires the data-API lifecycle (docs/data-apis.md, "Lifecycle"):
// the store under state_dir, opened and seeded from the file's data routes
// at Start, seeded again on every reload, served by the admin API, closed
// at Shutdown. What serves is the file's routes that are not data routes
// plus the store's published versions, each read by config.ParseDataAPI
// into an ordinary config.Route: g.cfg holds that effective configuration
// (so the OpenAPI document and app grants see it), g.fileCfg the file's.
// A change to what serves rebuilds the table and swaps it, as a reload
// does, before the admin call returns; requests never wait for it.
//
// Writers of the store (admin calls, seeding) hold reloadMu, so a check
// made before a write still holds when it commits.

// dataAPIs is the gateway's part of the lifecycle: the store (set at
// Start and cleared at Shutdown, under mu) and the published versions
// left out of the table, for /readyz.
type dataAPIs struct {
	store dataapis.Backend
	notes atomic.Pointer[[]string]
	// parsed keeps the routes read from the published definitions, so a
	// reload or rebuild that serves the same versions under the same data
	// sources does not parse them again; swept after each serving set is
	// built, it holds the versions that serve (config.DataAPICache).
	parsed config.DataAPICache
	// reusedTables counts the reloads whose seed changed no published
	// version, so the table swapped was kept (reseedDataAPIs; tests).
	reusedTables atomic.Uint64
}

// dataAPIsDBName is the data-API store's file under state_dir.
const dataAPIsDBName = "data-apis.db"

// openDataAPIs opens the data-API store (with cluster.etcd the shared
// one, cluster_dataapis.go; otherwise SQLite under cfg.StateDir, which
// openApps created) and seeds it from cfg's data routes.
func (g *Gateway) openDataAPIs(cfg *config.Config) (dataapis.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
	defer cancel()
	store, err := g.openSharedDataAPIs(cfg)
	if err == nil && store == nil {
		store, err = dataapis.Open(ctx, dataapis.Options{Path: filepath.Join(cfg.StateDir, dataAPIsDBName), Logger: g.logger})
	}
	if err != nil {
		return nil, err
	}
	g.seedDataAPIs(ctx, store, cfg)
	return store, nil
}

// startDataAPIs opens and seeds the store at Start (g.mu held) and
// builds the table that serves from it, closing the store on failure.
func (g *Gateway) startDataAPIs(cfg *config.Config) (dataapis.Backend, *config.Config, *proxy.Table, []string, error) {
	store, err := g.openDataAPIs(cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	eff, problems := g.servingConfig(cfg, store.Current())
	table, err := g.buildTable(eff)
	if err != nil {
		g.closeDataAPIs(store, " after a failed start")
		return nil, nil, nil, nil, err
	}
	return store, eff, table, problems, nil
}

// closeDataAPIs closes the store (nil: nothing), logging a failure.
func (g *Gateway) closeDataAPIs(store dataapis.Backend, when string) {
	if store == nil {
		return
	}
	if err := store.Close(); err != nil {
		g.logger.Error("closing the data-API store"+when, "error", err)
	}
}

// reloadData is what a reload's check of the data APIs found: the store
// (nil before Start) and the snapshot the effective configuration was
// built from, with the versions it left out.
type reloadData struct {
	store    dataapis.Backend
	snap     *dataapis.Snapshot
	problems []string
}

// reloadDataAPIs is a reload's check of the data APIs against the new
// file (dataapis.Routes.CheckReload) and the effective configuration to
// swap in: the new file with the store's versions as they are (those the
// seed after the swap replaces may not read under the new file, their
// data source gone: they are left out until it has). Before Start it
// returns cfg and no store.
// A reload already refused (err not nil) is passed through.
func (g *Gateway) reloadDataAPIs(cfg *config.Config, err error) (reloadData, *config.Config, error) {
	if err != nil {
		return reloadData{}, nil, err
	}
	g.mu.Lock()
	store := g.dataAPIs.store
	g.mu.Unlock()
	if store == nil {
		return reloadData{}, cfg, nil
	}
	snap := store.Current()
	// With cluster.etcd a version this node cannot compile is not served
	// here (the fleet's rule, cluster_dataapis.go), so it does not refuse
	// the reload either.
	if _, shared := store.(*sharedDataAPIs); !shared {
		if err := g.dataRoutes(cfg).CheckReload(cfg.Routes, snap); err != nil {
			return reloadData{}, nil, err
		}
	}
	eff, problems := g.servingConfig(cfg, snap)
	return reloadData{store, snap, problems}, eff, nil
}

// reseedDataAPIs seeds the store from the reloaded file, after the swap,
// and rebuilds the table from what it then publishes (no store: before
// Start, nothing). When the seed left the published versions as they were
// (a reload that changed no data route), the table swapped is already
// built from them and is kept: only the notes of the versions left out
// are recorded (without cluster.etcd; the fleet's view may have moved).
// A failed rebuild is logged; the swapped table serves.
func (g *Gateway) reseedDataAPIs(rd reloadData, cfg *config.Config) {
	if rd.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
	defer cancel()
	g.seedDataAPIs(ctx, rd.store, cfg)
	if _, shared := rd.store.(*sharedDataAPIs); !shared && rd.store.Current().SameServing(rd.snap) {
		g.dataAPIs.reusedTables.Add(1)
		g.noteDataAPIs(rd.problems)
		return
	}
	_ = g.applyDataAPIs(rd.store)
}

// seedDataAPIs applies the file's data routes to the store and logs the
// outcome. Failures are per API (logged by the store) and never refuse the
// configuration.
func (g *Gateway) seedDataAPIs(ctx context.Context, store dataapis.Backend, cfg *config.Config) {
	var file []dataapis.FileAPI
	for _, r := range cfg.Routes {
		if r.Data != nil {
			file = append(file, dataapis.FileAPI{Name: r.Name, Definition: cfg.DataDefinition(r.Name)})
		}
	}
	res, err := store.Seed(ctx, file)
	if err != nil {
		g.logger.Error("data APIs: seeding from the file failed; the stored data APIs keep serving", "error", err)
		return
	}
	g.logger.Info("data APIs seeded from the file", res.LogArgs()...)
}

// dataRoutes are config's routes as the data-API lifecycle's rules
// (dataapis.Routes) read them, the published definitions parsed through
// the gateway's cache (nil g: parsed every time).
func (g *Gateway) dataRoutes(file *config.Config) dataapis.Routes[config.Route] {
	var cache *config.DataAPICache
	if g != nil {
		cache = &g.dataAPIs.parsed
	}
	return dataapis.Routes[config.Route]{
		Parse: func(name string, def []byte) (config.Route, error) {
			r, err := cache.Parse(file, name, def)
			if err != nil {
				return config.Route{}, err
			}
			return *r, nil
		},
		Name: func(r config.Route) string { return r.Name },
		Data: func(r config.Route) bool { return r.Data != nil },
		Conflicts: func(routes []config.Route) []dataapis.Conflict {
			var out []dataapis.Conflict
			for _, c := range config.RouteConflicts(routes) {
				out = append(out, dataapis.Conflict(c))
			}
			return out
		},
	}
}

// effectiveConfig returns file with its data routes replaced by the
// store's published versions (dataapis.Routes.Effective), and the
// problems of the versions left out. The parse cache is swept after:
// it keeps what this serving set asked for.
func (g *Gateway) effectiveConfig(file *config.Config, snap *dataapis.Snapshot) (*config.Config, []string) {
	if snap == nil {
		return file, nil
	}
	eff := *file
	var problems []string
	eff.Routes, problems = g.dataRoutes(file).Effective(file.Routes, snap)
	g.dataAPIs.parsed.Sweep()
	return &eff, problems
}

// applyDataAPIs rebuilds the table from the file's configuration and the
// store's published versions and swaps it in, as a reload does. Called
// with reloadMu held (after an admin change or a seed); takes mu. The
// versions left out are logged and shown in /readyz's notes.
func (g *Gateway) applyDataAPIs(store dataapis.Backend) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	eff, problems := g.servingConfig(g.fileCfg, store.Current())
	table, err := g.buildTable(eff)
	if err != nil {
		g.logger.Error("data APIs: rebuilding the routing table failed; the previous one keeps serving", "error", err)
		return err
	}
	g.swapTable(table)
	g.cfg = eff
	g.noteDataAPIs(problems)
	return nil
}

// noteDataAPIs logs and keeps (for /readyz) the data APIs left out.
func (g *Gateway) noteDataAPIs(problems []string) {
	for _, p := range problems {
		g.logger.Error("data APIs: a published version is left out", "problem", p)
	}
	g.dataAPIs.notes.Store(&problems)
}

// dataAPIWriter is the admin API's DataAPIStore: the store, with every
// definition checked by config, writes under reloadMu, and the table
// rebuilt after each change to what serves.
func (g *Gateway) dataAPIWriter(store dataapis.Backend) dataapis.Writer {
	return dataapis.Writer{
		Store: store,
		Lock:  &g.reloadMu,
		Check: func(name string, body []byte) ([]byte, error) {
			g.mu.Lock()
			file := g.fileCfg
			g.mu.Unlock()
			if _, err := config.ParseDataAPI(file, name, body); err != nil {
				return nil, invalidDefinition(err)
			}
			def, _, err := config.DefinitionJSON(body)
			return def, invalidDefinition(err)
		},
		CheckServe: func(name string, n int, def []byte) error {
			g.mu.Lock()
			file, cur := g.fileCfg, g.cfg
			g.mu.Unlock()
			if err := g.checkDataAPIPinned(name, n, def); err != nil {
				return err
			}
			r, err := g.dataAPIs.parsed.Parse(file, name, def)
			if err != nil {
				return invalidDefinition(err)
			}
			if why, ok := g.dataRoutes(file).PublishConflict(cur.Routes, name, *r); ok {
				return fmt.Errorf("version %d of data API %s: %s: %w", n, name, why, admin.ErrRouteConflict)
			}
			return nil
		},
		Applied: func() error { return g.applyDataAPIs(store) },
		Published: func(name string, version int, def []byte, previous int) {
			g.dataAPIPublished(store, name, version, def, previous)
		},
	}
}

var _ admin.DataAPIStore = dataapis.Writer{}

// invalidDefinition turns config's *Errors into the store's
// *InvalidError, every problem with its field path ("" for the whole
// definition is shown as "definition").
func invalidDefinition(err error) error {
	var errs *config.Errors
	if !errors.As(err, &errs) {
		return err
	}
	out := &dataapis.InvalidError{}
	for _, fe := range *errs {
		field := fe.Path
		if field == "" {
			field = "definition"
		}
		out.Problems = append(out.Problems, dataapis.Problem{Field: field, Message: fe.Message})
	}
	return out
}
