package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/dataapis"
	"github.com/levee-gw/levee/internal/proxy"
	"github.com/prometheus/client_golang/prometheus"
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
	store *dataapis.Store
	notes atomic.Pointer[[]string]
}

// dataAPIsDBName is the data-API store's file under state_dir.
const dataAPIsDBName = "data-apis.db"

// openDataAPIs opens the data-API store under cfg.StateDir (which
// openApps created) and seeds it from cfg's data routes.
func (g *Gateway) openDataAPIs(cfg *config.Config) (*dataapis.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
	defer cancel()
	store, err := dataapis.Open(ctx, dataapis.Options{Path: filepath.Join(cfg.StateDir, dataAPIsDBName), Logger: g.logger})
	if err != nil {
		return nil, err
	}
	g.seedDataAPIs(ctx, store, cfg)
	return store, nil
}

// startDataAPIs opens and seeds the store at Start (g.mu held) and
// builds the table that serves from it, closing the store on failure.
func (g *Gateway) startDataAPIs(cfg *config.Config) (*dataapis.Store, *config.Config, *proxy.Table, []string, error) {
	store, err := g.openDataAPIs(cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	eff, problems := effectiveConfig(cfg, store.Current())
	table, err := g.buildTable(eff)
	if err != nil {
		g.closeDataAPIs(store, " after a failed start")
		return nil, nil, nil, nil, err
	}
	return store, eff, table, problems, nil
}

// closeDataAPIs closes the store (nil: nothing), logging a failure.
func (g *Gateway) closeDataAPIs(store *dataapis.Store, when string) {
	if store == nil {
		return
	}
	if err := store.Close(); err != nil {
		g.logger.Error("closing the data-API store"+when, "error", err)
	}
}

// reloadDataAPIs is a reload's check of the data APIs against the new
// file (checkReloadDataAPIs) and the effective configuration to swap in:
// the new file with the store's versions as they are (those the seed
// after the swap replaces may not read under the new file, their data
// source gone: they are left out until it has). Before Start it returns
// cfg and no store.
// A reload already refused (err not nil) is passed through.
func (g *Gateway) reloadDataAPIs(cfg *config.Config, err error) (*dataapis.Store, *config.Config, error) {
	if err != nil {
		return nil, nil, err
	}
	g.mu.Lock()
	store := g.dataAPIs.store
	g.mu.Unlock()
	if store == nil {
		return nil, cfg, nil
	}
	if err := checkReloadDataAPIs(cfg, store.Current()); err != nil {
		return nil, nil, err
	}
	eff, _ := effectiveConfig(cfg, store.Current())
	return store, eff, nil
}

// reseedDataAPIs seeds the store from the reloaded file, after the swap,
// and rebuilds the table from what it then publishes (store nil: before
// Start, nothing). A failed rebuild is logged; the swapped table serves.
func (g *Gateway) reseedDataAPIs(store *dataapis.Store, cfg *config.Config) {
	if store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
	defer cancel()
	g.seedDataAPIs(ctx, store, cfg)
	_ = g.applyDataAPIs(store)
}

// seedDataAPIs applies the file's data routes to the store and logs the
// outcome. Failures are per API (logged by the store) and never refuse the
// configuration.
func (g *Gateway) seedDataAPIs(ctx context.Context, store *dataapis.Store, cfg *config.Config) {
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
	g.logger.Info("data APIs seeded from the file", "created", len(res.Created), "updated", len(res.Updated),
		"unchanged", len(res.Unchanged), "kept_runtime", len(res.KeptRuntime), "stayed_deleted", len(res.StayedDeleted),
		"removed", len(res.Removed), "failed", len(res.Failed))
}

// effectiveConfig returns file with its data routes replaced by the
// store's published versions (snap nil: file as it is), in the file's
// order: a file data route's published version takes its place (none
// while it is offline or deleted), and the APIs only the store knows
// follow the file's routes, in name order. A published version that does
// not read as a data route of file (its data source is gone, say) or that
// collides with a route that serves is left out: each such problem is
// returned, naming the API.
func effectiveConfig(file *config.Config, snap *dataapis.Snapshot) (*config.Config, []string) {
	if snap == nil {
		return file, nil
	}
	var problems []string
	served := make(map[string]*config.Route, len(snap.Serving))
	for _, sv := range snap.Serving {
		r, err := config.ParseDataAPI(file, sv.Name, sv.Definition)
		if err != nil {
			problems = append(problems, fmt.Sprintf("data API %s version %d does not serve: %s", sv.Name, sv.Version, oneLine(err)))
			continue
		}
		served[sv.Name] = r
	}
	eff := *file
	eff.Routes = make([]config.Route, 0, len(file.Routes)+len(snap.Serving))
	fromStore := map[int]bool{} // indexes in eff.Routes of the store's versions
	placed := map[string]bool{}
	for _, r := range file.Routes {
		if r.Data == nil {
			eff.Routes = append(eff.Routes, r)
			continue
		}
		if v := served[r.Name]; v != nil {
			fromStore[len(eff.Routes)] = true
			eff.Routes = append(eff.Routes, *v)
			placed[r.Name] = true
		}
	}
	for _, sv := range snap.Serving {
		if v := served[sv.Name]; v != nil && !placed[sv.Name] {
			fromStore[len(eff.Routes)] = true
			eff.Routes = append(eff.Routes, *v)
		}
	}
	return dropConflicts(&eff, fromStore, problems)
}

// dropConflicts leaves out of eff each data API that collides with
// another route. The file's own routes never collide with each other
// (config.Parse refused that), so one route of each conflict is from the
// store (fromStore): that one goes, the later one when both are.
func dropConflicts(eff *config.Config, fromStore map[int]bool, problems []string) (*config.Config, []string) {
	conflicts := config.RouteConflicts(eff.Routes)
	if len(conflicts) == 0 {
		return eff, problems
	}
	drop := make(map[int]bool, len(conflicts))
	for _, c := range conflicts {
		i := c.Route
		if !fromStore[i] && fromStore[c.Other] {
			i = c.Other
		}
		if drop[i] {
			continue
		}
		drop[i] = true
		problems = append(problems, fmt.Sprintf("data API %s does not serve: %s", eff.Routes[i].Name, c.Message))
	}
	kept := make([]config.Route, 0, len(eff.Routes)-len(drop))
	for i, r := range eff.Routes {
		if !drop[i] {
			kept = append(kept, r)
		}
	}
	eff.Routes = kept
	return eff, problems
}

// checkReloadDataAPIs refuses a reload under which a data API changed at
// runtime would stop serving: every published version that seeding will
// leave as it is (created through the admin API, or overridden) must
// still read as a data route of the new file and collide with none of
// its routes. The file's own data routes are the file's to validate (and
// seeding applies them); a file data route whose name the runtime owns
// is left out, as seeding leaves it out.
func checkReloadDataAPIs(file *config.Config, snap *dataapis.Snapshot) error {
	if snap == nil || len(snap.Runtime) == 0 {
		return nil
	}
	eff := *file
	eff.Routes = make([]config.Route, 0, len(file.Routes)+len(snap.Serving))
	for _, r := range file.Routes {
		if r.Data == nil || !snap.Runtime[r.Name] {
			eff.Routes = append(eff.Routes, r)
		}
	}
	var problems []string
	for _, sv := range snap.Serving {
		if !snap.Runtime[sv.Name] {
			continue
		}
		r, err := config.ParseDataAPI(file, sv.Name, sv.Definition)
		if err != nil {
			problems = append(problems, fmt.Sprintf("data API %s version %d (changed at runtime) would not serve: %s", sv.Name, sv.Version, oneLine(err)))
			continue
		}
		eff.Routes = append(eff.Routes, *r)
	}
	for _, c := range config.RouteConflicts(eff.Routes) {
		problems = append(problems, fmt.Sprintf("data API %s (changed at runtime) would not serve: %s", eff.Routes[c.Route].Name, c.Message))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n") + "\n(take those data APIs offline or delete them through the admin API first, or keep what they need in the file)")
	}
	return nil
}

// oneLine joins a multi-line error's lines with "; ".
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// applyDataAPIs rebuilds the table from the file's configuration and the
// store's published versions and swaps it in, as a reload does. Called
// with reloadMu held (after an admin change or a seed); takes mu. The
// versions left out are logged and shown in /readyz's notes.
func (g *Gateway) applyDataAPIs(store *dataapis.Store) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	eff, problems := effectiveConfig(g.fileCfg, store.Current())
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

// dataAPIView is the admin API's DataAPIStore: the store, with every
// definition checked by config and the table rebuilt after each change to
// what serves.
type dataAPIView struct {
	g     *Gateway
	store *dataapis.Store
}

var _ admin.DataAPIStore = dataAPIView{}

func (v dataAPIView) Get(ctx context.Context, name string) (*dataapis.API, error) {
	return v.store.Get(ctx, name)
}

func (v dataAPIView) List(ctx context.Context, after string, limit int) (dataapis.Page, error) {
	return v.store.List(ctx, after, limit)
}

// definition checks body as data API name's definition against the file's
// configuration and returns its canonical form.
func (v dataAPIView) definition(name string, body []byte) ([]byte, error) {
	v.g.mu.Lock()
	file := v.g.fileCfg
	v.g.mu.Unlock()
	if _, err := config.ParseDataAPI(file, name, body); err != nil {
		return nil, invalidDefinition(err)
	}
	def, _, err := config.DefinitionJSON(body)
	return def, invalidDefinition(err)
}

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

func (v dataAPIView) Create(ctx context.Context, name string, body []byte) (*dataapis.API, error) {
	v.g.reloadMu.Lock()
	defer v.g.reloadMu.Unlock()
	def, err := v.definition(name, body)
	if err != nil {
		return nil, err
	}
	return v.store.Create(ctx, name, def)
}

func (v dataAPIView) AddVersion(ctx context.Context, name string, body []byte) (*dataapis.API, error) {
	v.g.reloadMu.Lock()
	defer v.g.reloadMu.Unlock()
	if _, err := v.store.Get(ctx, name); err != nil {
		return nil, err
	}
	def, err := v.definition(name, body)
	if err != nil {
		return nil, err
	}
	return v.store.AddVersion(ctx, name, def)
}

func (v dataAPIView) Publish(ctx context.Context, name string, version int) (*dataapis.API, error) {
	return v.publish(ctx, name, version, false)
}

func (v dataAPIView) Rollback(ctx context.Context, name string, version int) (*dataapis.API, error) {
	return v.publish(ctx, name, version, true)
}

// publish checks that the version a publish or rollback goes to reads as
// a data route of the file's configuration and collides with no route
// that serves, then makes it serve.
func (v dataAPIView) publish(ctx context.Context, name string, version int, rollback bool) (*dataapis.API, error) {
	v.g.reloadMu.Lock()
	defer v.g.reloadMu.Unlock()
	n, def, err := v.store.Resolve(ctx, name, version, rollback)
	if err != nil {
		return nil, err
	}
	v.g.mu.Lock()
	file, cur := v.g.fileCfg, v.g.cfg
	v.g.mu.Unlock()
	r, err := config.ParseDataAPI(file, name, def)
	if err != nil {
		return nil, invalidDefinition(err)
	}
	routes := make([]config.Route, 0, len(cur.Routes)+1)
	for _, rc := range cur.Routes {
		if rc.Name != name {
			routes = append(routes, rc)
		}
	}
	routes = append(routes, *r)
	for _, c := range config.RouteConflicts(routes) {
		if c.Route == len(routes)-1 || c.Other == len(routes)-1 {
			return nil, fmt.Errorf("version %d of data API %s: %s: %w", n, name, c.Message, admin.ErrRouteConflict)
		}
	}
	call := v.store.Publish
	if rollback {
		call = v.store.Rollback
	}
	a, err := call(ctx, name, n)
	if err != nil {
		return nil, err
	}
	return a, v.g.applyDataAPIs(v.store)
}

func (v dataAPIView) Offline(ctx context.Context, name string) (*dataapis.API, error) {
	v.g.reloadMu.Lock()
	defer v.g.reloadMu.Unlock()
	a, err := v.store.Offline(ctx, name)
	if err != nil {
		return nil, err
	}
	return a, v.g.applyDataAPIs(v.store)
}

func (v dataAPIView) Delete(ctx context.Context, name string) error {
	v.g.reloadMu.Lock()
	defer v.g.reloadMu.Unlock()
	if err := v.store.Delete(ctx, name); err != nil {
		return err
	}
	return v.g.applyDataAPIs(v.store)
}

// dataAPICollector reports levee_data_apis{state} from the store's
// snapshot at scrape time (nothing before Start).
type dataAPICollector struct {
	g    *Gateway
	desc *prometheus.Desc
}

func newDataAPICollector(g *Gateway) *dataAPICollector {
	return &dataAPICollector{g: g, desc: prometheus.NewDesc("levee_data_apis",
		"Data APIs in the store, by lifecycle state (draft, published, offline).", []string{"state"}, nil)}
}

func (c *dataAPICollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *dataAPICollector) Collect(ch chan<- prometheus.Metric) {
	c.g.mu.Lock()
	store := c.g.dataAPIs.store
	c.g.mu.Unlock()
	if store == nil {
		return
	}
	count := store.Current().Count
	for _, st := range []dataapis.State{dataapis.Draft, dataapis.Published, dataapis.Offline} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(count[st]), string(st))
	}
}
