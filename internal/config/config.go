// Package config reads levee's configuration file into typed values.
//
// Parsing is strict: the YAML is decoded into a node tree and walked by hand,
// so every problem is reported with the path of the field it concerns
// ("upstreams.video.endpoints[1].weight") and the value that was found.
// Unknown keys, duplicate keys, aliases, wrong types and out-of-range values
// are errors; nothing is coerced or replaced by a default silently. Parse
// keeps going after a problem and reports all of them at once as *Errors.
//
// A field that is omitted or null ("key: ~", or "key:" with nothing after
// it) takes its default: its field table entry's def, named in the doc
// comment of the field it applies to.
//
// Packages below the composition root (internal/gateway) do not import this
// package; the gateway turns a validated *Config into their own options.
package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// The configuration is laid out by block: each YAML block's file holds its
// Go type, its field table (fields.go says how tables are read), its
// defaults and its reader with the rules across its fields, as a Caddy
// module's file holds its struct, Provision and Validate: server.go,
// admin.go, memory.go, log.go (log, metrics, profiles),
// accesslog.go, tracing.go, cluster.go, cluster_etcd.go, upstreams.go,
// balancers.go, discovery.go, health.go, retry.go, limits.go, routes.go,
// framing.go (trailers, upgrades), apps.go, data_sources.go and
// data_routes.go. This file holds the root block.

// Config is a whole, validated levee configuration. Parse returns it only
// when every field is valid, with every default applied; a *Config is not
// modified afterwards and may be shared between goroutines for reading.
type Config struct {
	// Listen is the data-plane address, "host:port" (`listen`, required
	// unless Listeners is set; empty then).
	// An empty host (":8080") listens on all interfaces. Port 0 asks the
	// OS for a free port (for tests and the demo).
	Listen string
	// TLS, when not nil, makes Listen serve HTTPS (`tls`, optional). nil
	// means plain HTTP.
	TLS *TLS
	// Listeners are the data-plane listeners of the listeners form
	// (`listeners`, listeners.go); nil in the one-listener form. Read
	// both forms through ListenerSet.
	Listeners []Listener `json:",omitempty"`
	// Admin is the isolated admin listener (`admin`, required).
	Admin Admin
	// StateDir is where levee keeps state on disk, such as last-known-good
	// snapshots (`state_dir`). Default DefaultStateDir. A relative path is
	// relative to the process's working directory. May not be empty.
	StateDir string
	// Server holds the limits for client-facing connections (`server`).
	Server Server
	// Memory sets the Go runtime's soft memory limit and the heap
	// watermarks above which requests are shed (`memory`: a block, or
	// off). nil, the default (no `memory` block, or `memory: ~`), is the
	// automatic limit (memguard.DetectLimit: GOMEMLIMIT or the cgroup's
	// limit); Memory.Off (`memory: off`) is no guard at all.
	Memory *Memory
	// Cluster, when not nil, makes this node one of several sharing
	// limits (`cluster`, optional; cluster.go).
	Cluster *Cluster
	// Log configures logging (`log`).
	Log Log
	// Metrics configures what the metrics endpoint reports (`metrics`).
	Metrics Metrics
	// Profiles configures the automatic CPU profiles (`profiles`).
	Profiles Profiles
	// Rollback configures the automatic rollback of changes (`rollback`; rollback.go).
	Rollback Rollback
	// Tracing, when not nil, turns OpenTelemetry tracing on (`tracing`,
	// optional; tracing.go). nil, the default, means off.
	Tracing *Tracing
	// Identity, when not nil, declares identity providers (`identity`,
	// optional): the JWT issuers of routes with auth: jwt (identity.go).
	Identity *Identity
	// Upstreams maps an upstream's name to the upstream (`upstreams`, at
	// least one required). Every value is non-nil and its Name equals its
	// key.
	Upstreams map[string]*Upstream
	// UpstreamOrder lists the keys of Upstreams in the order they appear in
	// the file. It is filled by the parser, not read from YAML.
	UpstreamOrder []string
	// DataSources maps a data source's name to it (`data_sources`,
	// optional; see data.go). With data sources, `upstreams` may be
	// omitted: a file of data routes only.
	DataSources map[string]*DataSource
	// DataSourceOrder lists the keys of DataSources in file order.
	DataSourceOrder []string
	// Routes are the routing rules in file order (`routes`, at least one
	// required). Every route's Upstream is a key of Upstreams, route names
	// are unique, and no two routes have the same host, path prefix and an
	// overlapping method set.
	Routes []Route
	// Apps are the consumer apps the file defines (`apps`, optional, at
	// most 10000, ids unique). They seed the app store under StateDir;
	// changes made through the admin API take precedence as
	// docs/apps.md describes. nil when omitted.
	Apps []App

	// dataDefs holds each data route's definition as canonical JSON, by
	// route name (DataDefinition); nil without data routes.
	dataDefs map[string][]byte
	// source is the file's content as parsed (Source).
	source []byte
}

// Source returns the file's content this configuration was parsed from
// (what the rollback's versions and pins name); nil for one built in code.
func (c *Config) Source() []byte { return c.source }

// Kinds of ConsistentHash.HashOn, as Key returns them.
const (
	HashOnHeader   = "header"
	HashOnCookie   = "cookie"
	HashOnQuery    = "query"
	HashOnClientIP = "client_ip"
	HashOnPath     = "path"
)

// Load reads the file at path and parses it with Parse. Files larger than
// 4 MiB are refused without being read whole. Every error, including a
// failure to read the file, is an *Errors.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, engine.FileError(fmt.Sprintf("reading config: %v", err))
	}
	defer f.Close()
	// Read into a buffer of the file's size (io.ReadAll grows one by
	// doubling: about as much again of garbage at every reload of a 4 MiB
	// file); a file that grows meanwhile is read on, to the same limit.
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() <= maxFileBytes {
		buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
		if _, err := buf.ReadFrom(io.LimitReader(f, maxFileBytes+1)); err != nil {
			return nil, engine.FileError(fmt.Sprintf("reading config: %v", err))
		}
		return Parse(buf.Bytes())
	}
	return Read(f)
}

// Read parses the configuration read from r (at most 4 MiB are read) as
// Load does a file's: `levee validate -config -` reads standard input
// with it. Relative paths in it resolve against the working directory,
// as they do in a file.
func Read(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileBytes+1))
	if err != nil {
		return nil, engine.FileError(fmt.Sprintf("reading config: %v", err))
	}
	return Parse(data)
}

// Parse decodes one YAML document, applies defaults and validates the
// result. It returns either a complete *Config and a nil error, or a nil
// *Config and an *Errors listing every problem found, in file order where
// the problem has a position.
//
// Input over 4 MiB, nesting deeper than 64 levels, aliases (*name), merge
// keys (<<) and more than one document are refused. Parse reads the file
// system to check that the files it names exist and are readable, and
// loads the TLS certificates, keys and CA files as the gateway will; relative
// paths are resolved against the working directory. It is safe to call
// concurrently.
func Parse(data []byte) (*Config, error) {
	if len(data) > maxFileBytes {
		return nil, engine.FileError(fmt.Sprintf("file is larger than the %s limit", engine.FormatSize(maxFileBytes)))
	}
	root, err := engine.Decode(data)
	if err != nil {
		return nil, err
	}
	p := &parser{&engine.Parser{}}
	if !p.Scan(root, "", 0) {
		return nil, p.Result() // scan only fails after adding an error
	}
	cfg := p.config(root)
	if errs := p.Result(); errs != nil {
		return nil, errs
	}
	cfg.source = data
	return cfg, nil
}

var rootBlock = engine.NewBlock(
	engine.Field{Name: "listen", Kind: engine.KindString, Doc: "host:port of the data-plane listener; required unless listeners is set", Reload: engine.Restart,
		Check: checkListen, Bind: engine.At(func(c *Config) *string { return &c.Listen })},
	engine.Field{Name: "tls", Kind: engine.KindBlock, Sub: tlsBlock, Doc: "serve HTTPS (and HTTP/2) on listen; plain HTTP when omitted", Reload: engine.RestartOnOff},
	listenersField,
	engine.Field{Name: "admin", Kind: engine.KindBlock, Sub: adminBlock, Required: true, Doc: "the admin API"},
	engine.Field{Name: "state_dir", Kind: engine.KindString, NonEmpty: true, Def: DefaultStateDir, Doc: "directory of the app store and snapshots",
		Empty: "must not be empty (omit it for the default " + strconv.Quote(DefaultStateDir) + ")",
		Bind:  engine.At(func(c *Config) *string { return &c.StateDir })},
	engine.Field{Name: "server", Kind: engine.KindBlock, Sub: serverBlock, Doc: "the client-facing server",
		Bind: engine.At(func(c *Config) *Server { return &c.Server })},
	memoryField,
	engine.Field{Name: "cluster", Kind: engine.KindBlock, Sub: clusterBlock, Doc: "cluster mode: limits shared with other nodes; a single node when omitted", Reload: engine.Restart,
		Bind: engine.Opt(func(c *Config) **Cluster { return &c.Cluster }, func() *Cluster { return &Cluster{} })},
	engine.Field{Name: "log", Kind: engine.KindBlock, Sub: logBlock, Doc: "logging"},
	engine.Field{Name: "metrics", Kind: engine.KindBlock, Sub: metricsBlock, Doc: "metrics",
		Bind: engine.At(func(c *Config) *Metrics { return &c.Metrics })},
	engine.Field{Name: "profiles", Kind: engine.KindBlock, Sub: profilesBlock, Doc: "CPU profiles levee captures by itself when busy or shedding",
		Bind: engine.At(func(c *Config) *Profiles { return &c.Profiles })},
	engine.Field{Name: "rollback", Kind: engine.KindBlock, Sub: rollbackBlock, Doc: "automatic rollback of a change that hurt the node (docs/rollback.md)", Reload: engine.Restart,
		Bind: engine.At(func(c *Config) *Rollback { return &c.Rollback })},
	engine.Field{Name: "tracing", Kind: engine.KindBlock, Sub: tracingBlock, Doc: "OpenTelemetry tracing exported over OTLP/HTTP; off when omitted",
		Bind: engine.Opt(func(c *Config) **Tracing { return &c.Tracing }, defaultTracing)},
	engine.Field{Name: "identity", Kind: engine.KindBlock, Sub: identityBlock, Doc: "identity providers routes name: JWT issuers for auth: jwt"},
	engine.Field{Name: "upstreams", Kind: engine.KindMap, Sub: upstreamBlock, MinItems: 1, Doc: "upstreams by name; required unless data_sources is set"},
	engine.Field{Name: "data_sources", Kind: engine.KindMap, Sub: dataSourceBlock, MinItems: 1, Doc: "databases data routes query, by name"},
	engine.Field{Name: "routes", Kind: engine.KindList, Required: true, MinItems: 1, Item: &engine.Field{Kind: engine.KindBlock, Sub: routeBlock},
		Doc: "routes; the most specific match wins"},
	engine.Field{Name: "apps", Kind: engine.KindList, MaxItems: maxApps, Item: &engine.Field{Kind: engine.KindBlock, Sub: appBlock},
		Doc: "API consumers, their keys, grants and limits"},
)

// config reads the root mapping. root is nil for an empty file.
func (p *parser) config(root *yaml.Node) *Config {
	c := defaultConfig()
	f, ok := p.Block("", root, rootBlock)
	if !ok {
		return c
	}
	// listen, tls, state_dir, server and metrics.
	bad := p.Bind(f, root, "", rootBlock, c)
	p.log(&c.Log, f["log"])
	if v := f["tls"]; v != nil {
		p.tls(c, v)
	}
	p.listeners(c, f, root)
	p.admin(c, f["admin"], root, !bad["listen"])
	if v := f["memory"]; v != nil {
		c.Memory = p.memory("memory", v)
	}
	var declared map[string]bool
	upstreamsOK := true
	if v := f["upstreams"]; v != nil || f["data_sources"] == nil {
		declared, upstreamsOK = p.upstreams(c, v, root)
	}
	if v := f["data_sources"]; v != nil {
		p.dataSources(c, v)
	}
	if v := f["identity"]; v != nil {
		c.Identity = p.identity("identity", v)
	}
	p.routes(c, f["routes"], root, declared, upstreamsOK)
	p.checkRouteIdentity(c, root)
	p.checkRouteClientCert(c, root)
	if v := f["apps"]; v != nil {
		var routeNames []string
		for _, r := range c.Routes {
			if validName(r.Name) {
				routeNames = append(routeNames, r.Name)
			}
		}
		p.apps(c, v, newRouteNames(routeNames), len(c.Routes) > 0)
	}
	return c
}

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultStateDir is Config.StateDir when `state_dir` is omitted.
	DefaultStateDir = "./levee-state"
)

func defaultConfig() *Config {
	c := engine.WithDefaults(rootBlock, &Config{})
	engine.WithDefaults(adminBlock, &c.Admin)
	engine.WithDefaults(serverBlock, &c.Server)
	engine.WithDefaults(serverPathsBlock, &c.Server.Paths)
	engine.WithDefaults(logBlock, &c.Log)
	c.Log.Access, c.Log.AccessLog = DefaultLogAccess, defaultAccessLog() // access is true, false or a block: no bind
	engine.WithDefaults(metricsBlock, &c.Metrics)
	engine.WithDefaults(profilesBlock, &c.Profiles)
	engine.WithDefaults(rollbackBlock, &c.Rollback)
	return c
}
