package config

import (
	"crypto/sha256"
	"reflect"
	"slices"
	"sync"
	"weak"
)

// DataAPICache keeps the routes ParseDataAPI read from data-API
// definitions, so that a reload or a table rebuild serving the same
// versions under the same data sources does not parse them again (at
// 1,000 data APIs a parse of every one was about 40 MiB of allocation
// and 0.2 s of CPU, twice per reload: docs/performance.md, "Scale").
//
// What a parse depends on: ParseDataAPI(c, name, def) reads c only
// through c.DataSources and c.DataSourceOrder (routeData: the source
// and its driver, the suggestion of an unknown one) and whether c.Routes
// has a route named name that is not a data route (refused). The key is
// (name, SHA-256 of def); the data sources are compared (reflect.DeepEqual)
// with those the entries were parsed under, and a change drops every
// entry; a name that a file route takes is never served from the cache.
// A change that makes ParseDataAPI read more of c must add it here
// (TestDataAPICacheDependsOnSources).
//
// The routes returned share their pointer fields (Data, Match's slices,
// ...) with the cached entry and with every other caller's copy: routes
// of a *Config are never changed after Parse, and must not be.
//
// Bound: Sweep drops every entry not asked for since the previous Sweep
// (the gateway sweeps after building each serving set, so the cache holds
// the versions that serve: at most the data-API store's 1,000), and
// at most maxDataAPICacheEntries are kept between sweeps. Errors are not
// cached. Safe for concurrent use; a parse runs outside the lock.
type DataAPICache struct {
	mu sync.Mutex
	// cfg is the configuration last checked (weak: the cache does not
	// keep a replaced configuration alive); sources and order are the
	// data sources the entries were parsed under; taken the names of
	// cfg's routes that are not data routes.
	cfg     weak.Pointer[Config]
	sources map[string]*DataSource
	order   []string
	taken   map[string]bool
	gen     uint64 // counts changes of the sources
	entries map[dataAPIKey]*dataAPIEntry
	hits    uint64
	misses  uint64
}

// maxDataAPICacheEntries bounds the cache between sweeps: four times the
// data-API store's cap (dataapis.MaxAPIs, 1,000).
const maxDataAPICacheEntries = 4000

type dataAPIKey struct {
	name string
	sum  [sha256.Size]byte
}

type dataAPIEntry struct {
	route Route
	used  bool // asked for since the last Sweep
}

// Parse returns what ParseDataAPI(c, name, def) returns, from the cache
// when name's definition def was parsed before under the same data
// sources. A nil cache parses every time.
func (dc *DataAPICache) Parse(c *Config, name string, def []byte) (*Route, error) {
	if dc == nil {
		return ParseDataAPI(c, name, def)
	}
	key := dataAPIKey{name, sha256.Sum256(def)}
	dc.mu.Lock()
	gen := dc.check(c)
	if dc.taken[name] {
		dc.mu.Unlock()
		return ParseDataAPI(c, name, def) // refused: a file route has the name
	}
	if e := dc.entries[key]; e != nil {
		e.used = true
		dc.hits++
		r := e.route
		dc.mu.Unlock()
		return &r, nil
	}
	dc.misses++
	dc.mu.Unlock()

	r, err := ParseDataAPI(c, name, def)
	if err != nil {
		return nil, err
	}
	dc.mu.Lock()
	defer dc.mu.Unlock()
	// Kept only if the sources did not change meanwhile (a Parse under
	// another configuration's sources), and within the bound.
	if dc.gen == gen && len(dc.entries) < maxDataAPICacheEntries {
		if dc.entries == nil {
			dc.entries = map[dataAPIKey]*dataAPIEntry{}
		}
		dc.entries[key] = &dataAPIEntry{route: *r, used: true}
	}
	return r, nil
}

// check makes c the configuration of the next lookups and returns the
// sources' generation: when c's data sources differ from those the
// entries were parsed under, every entry is dropped. dc.mu held.
func (dc *DataAPICache) check(c *Config) uint64 {
	if dc.cfg.Value() == c {
		return dc.gen
	}
	if dc.gen == 0 || !slices.Equal(dc.order, c.DataSourceOrder) || !reflect.DeepEqual(dc.sources, c.DataSources) {
		dc.entries = nil
		dc.gen++
	}
	dc.cfg = weak.Make(c)
	dc.sources, dc.order = c.DataSources, slices.Clone(c.DataSourceOrder)
	dc.taken = make(map[string]bool, len(c.Routes))
	for i := range c.Routes {
		if c.Routes[i].Data == nil {
			dc.taken[c.Routes[i].Name] = true
		}
	}
	return dc.gen
}

// Sweep drops every entry not asked for since the previous Sweep.
func (dc *DataAPICache) Sweep() {
	if dc == nil {
		return
	}
	dc.mu.Lock()
	defer dc.mu.Unlock()
	for k, e := range dc.entries {
		if !e.used {
			delete(dc.entries, k)
			continue
		}
		e.used = false
	}
}

// DataAPICacheStats are a cache's counts, for tests and the figures of
// docs/performance.md.
type DataAPICacheStats struct {
	Entries      int
	Hits, Misses uint64
}

// Stats returns the cache's counts so far.
func (dc *DataAPICache) Stats() DataAPICacheStats {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	return DataAPICacheStats{Entries: len(dc.entries), Hits: dc.hits, Misses: dc.misses}
}
