// Package admin serves levee's control plane on its own listener: liveness,
// readiness, Prometheus metrics, pprof profiles and the JSON API under
// /api/v1/. It runs on its own http.Server and goroutines and sits behind
// none of the data plane's limits, so an operator can still see and act
// while the data plane is saturated. It reads and acts on the gateway only
// through the small interfaces below.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// EndpointView is one endpoint as the API shows it.
type EndpointView struct {
	Address string  `json:"address"`
	Weight  float64 `json:"weight"` // as configured or announced (two decimals)
	// EffectiveWeight is the weight the picker uses now: 0 while the
	// endpoint does not serve, less than Weight during slow start.
	EffectiveWeight float64 `json:"effective_weight"`
	Zone            string  `json:"zone,omitempty"`
	// State is "healthy", "slow_start", "unhealthy" (failed active
	// checks), "ejected" (outlier detection) or "drained" (weight 0).
	// (Before health checks existed a serving endpoint showed "active".)
	State string `json:"state"`
	// Ejections counts the ejections that still lengthen the next one.
	Ejections int `json:"ejections"`
	// LastReason says why the state last changed.
	LastReason string    `json:"last_reason,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	Inflight   int64     `json:"inflight"`
	Requests   uint64    `json:"requests"`
	Failures   uint64    `json:"failures"`
}

// UpstreamView is one upstream as the API shows it.
type UpstreamView struct {
	Name     string `json:"name"`
	Balancer string `json:"balancer"`
	// Panic is true while too few endpoints are healthy and requests are
	// balanced over every non-drained one; PanicTotal counts entries.
	Panic      bool   `json:"panic"`
	PanicTotal uint64 `json:"panic_total"`
	// Discovery is set for upstreams fed by a registry or by pushes.
	Discovery *DiscoveryView `json:"discovery,omitempty"`
	// Endpoints is a page of the endpoints in address order, at most
	// ?limit of them (upstreams.go); EndpointsTotal counts them all and
	// EndpointsNext is the path of the next page, absent on the last.
	// The handlers always write endpoints and endpoints_total (the tags
	// say omitempty for the head they marshal without them).
	Endpoints      []EndpointView `json:"endpoints,omitempty"`
	EndpointsTotal int            `json:"endpoints_total,omitempty"`
	EndpointsNext  string         `json:"endpoints_next,omitempty"`
}

// DiscoveryView is the state of an upstream's registry feed.
type DiscoveryView struct {
	// Source is "file:PATH", "etcd:PREFIX" or "push".
	Source string `json:"source"`
	// ServingFrom says where the serving set came from: "registry",
	// "push", "snapshot" (the registry has not delivered since start),
	// "config" (static endpoints) or "" (nothing yet).
	ServingFrom string    `json:"serving_from"`
	Updated     time.Time `json:"updated,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	// Quarantined lists the instances of the latest update that were
	// rejected, with their reason and raw value: the first
	// MaxQuarantinedShown of them; QuarantinedTotal counts them all.
	Quarantined      []QuarantineView `json:"quarantined"`
	QuarantinedTotal int              `json:"quarantined_total"`
	// Held is the update the delta guard is holding back, if any.
	Held *HeldView `json:"held,omitempty"`
}

// QuarantineView is one rejected registry instance.
type QuarantineView struct {
	Key     string `json:"key"`
	Reason  string `json:"reason"`
	Field   string `json:"field,omitempty"`
	Raw     string `json:"raw"`
	Message string `json:"message"`
}

// HeldView is an update held back by the delta guard.
type HeldView struct {
	Since        time.Time `json:"since"`
	DropFraction float64   `json:"drop_fraction"`
	Instances    int       `json:"instances"`
	ConfirmWith  string    `json:"confirm_with"`
}

// Gateway is what the admin API reads from and acts on.
type Gateway interface {
	// Ready reports whether the data plane is serving, and if not, why.
	Ready() (bool, string)
	// Upstreams returns the serving snapshot's upstreams in the
	// configuration's order, each without its endpoints (Endpoints nil:
	// an upstream may have 100,000 of them; Endpoints pages them).
	Upstreams() []UpstreamView
	// Endpoints calls fn with upstream name's endpoints whose address
	// sorts after after (all of them when after is ""), in address order,
	// at most limit of them, and stops early when fn returns false (a
	// page that holds every endpoint, after "" and at most limit of them,
	// may keep the order they are configured or announced in). It
	// builds the views a few hundred at a time, never the whole list, and
	// calls fn holding no lock (fn writes to the network). It returns the
	// upstream's endpoint count and whether endpoints remain after the
	// last one passed to fn; ok is false (fn never called) for an upstream
	// not serving. Each call reads one snapshot; pages read in turn may
	// come from different ones (an endpoint present throughout is listed
	// exactly once by a walk, by address).
	Endpoints(name, after string, limit int, fn func(EndpointView) bool) (page EndpointsPage, ok bool)
	// Notes lists conditions under which levee serves but degraded (for
	// example an upstream served from its snapshot because its registry
	// is unreachable); /readyz shows them without failing.
	Notes() []string
	// Reload re-reads the configuration; on error the old one keeps serving
	// and the error's lines (one per problem) are shown to the caller.
	Reload() error
	// PushEndpoints offers a JSON array of instances to upstream name.
	// Errors: ErrNotPushUpstream, or a *PushRefusedError when the list was
	// refused whole; in cluster mode also ErrPushTooLarge and
	// ErrStoreUnavailable (discovery.go maps each to its status).
	PushEndpoints(ctx context.Context, name string, body []byte) (PushResult, error)
	// ConfirmUpstream applies the update held by name's delta guard.
	// Errors: ErrNoFeed, ErrNothingHeld; in cluster mode also
	// ErrStoreUnavailable.
	ConfirmUpstream(ctx context.Context, name string) (ConfirmResult, error)
}

// maxPushBytes bounds a pushed endpoint list (the discovery parser's own
// limit is the same).
const maxPushBytes = 16 << 20

// Options configure the admin handler.
type Options struct {
	Gateway  Gateway
	Gatherer prometheus.Gatherer
	// Apps serves /api/v1/apps; nil leaves those paths unserved (404).
	Apps AppStore
	// Cluster serves GET /api/v1/cluster (cluster.go); nil leaves it
	// unserved (404).
	Cluster func(ctx context.Context) ClusterView
	// Docs serves GET /api/v1/openapi.json; nil leaves it unserved (404).
	Docs APIDocs
	// DataAPIs serves /api/v1/data-apis; nil leaves those paths unserved
	// (404).
	DataAPIs DataAPIStore
	// Profiles serves GET /api/v1/profiles; nil leaves it unserved (404).
	Profiles ProfileStore
	// Operator serves GET /api/v1/config and GET /api/v1/routes; nil
	// leaves them unserved (404).
	Operator Operator
	// Reloads serves GET /api/v1/reloads, the recent configuration loads
	// newest first; nil leaves it unserved (404).
	Reloads func() []ReloadView
	// Rollbacks serves /api/v1/rollbacks (rollbacks.go); nil leaves those
	// paths unserved (404).
	Rollbacks RollbackStore
	// Tokens returns the bearer tokens the admin API accepts, each with
	// its scope, read per request so that a reload can change them; nil,
	// or none returned, means the API is open. With tokens, every path but
	// /healthz, /readyz and the web UI's files under /ui/ (metrics and
	// pprof included) answers 401
	// without "Authorization: Bearer TOKEN" naming one of them, and a
	// read token is refused 403 insufficient_scope on anything but a GET
	// or HEAD.
	Tokens func() []Token
	// OpenReads, when it returns true, lets GET and HEAD requests through
	// without a token although Tokens returns some: the generated write
	// token's mode (admin.token: generate), where only writes need a
	// credential. Read per request; nil means false.
	OpenReads func() bool
	// Hosts returns the host names (admin.hosts) accepted in a request's
	// Host besides IP literals and localhost (browser.go), read per
	// request; nil accepts none.
	Hosts func() []string
}

// NewHandler returns the admin API's handler: every request passes the
// browser checks (browser.go: Host, then Origin and Sec-Fetch-Site), the
// token check, then the Content-Type check of writes, before its route.
func NewHandler(o Options) (http.Handler, error) {
	mux, err := newMux(o)
	if err != nil {
		return nil, err
	}
	var h http.Handler = requireJSON(mux)
	if o.Tokens != nil {
		h = requireToken(o.Tokens, o.OpenReads, h)
	}
	return guardBrowser(o.Hosts, h), nil
}

// newMux registers every admin route o asks for.
func newMux(o Options) (*adminMux, error) {
	if o.Gateway == nil || o.Gatherer == nil {
		return nil, errors.New("admin: Gateway and Gatherer are required")
	}
	mux := newAdminMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ok, why := o.Gateway.Ready(); !ok {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "reason": why})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "notes": o.Gateway.Notes()})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)

	upstreamRoutes(mux, o.Gateway)
	mux.HandleFunc("PUT /api/v1/upstreams/{name}/endpoints", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxPushBytes+1))
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
			return
		}
		if len(body) > maxPushBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "an endpoint list may be at most 16 MiB")
			return
		}
		name := r.PathValue("name")
		res, err := o.Gateway.PushEndpoints(r.Context(), name, body)
		writePush(w, name, res, err)
	})
	mux.HandleFunc("POST /api/v1/upstreams/{name}/confirm", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		res, err := o.Gateway.ConfirmUpstream(r.Context(), name)
		writeConfirm(w, name, res, err)
	})
	mux.HandleFunc("POST /api/v1/reload", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		if err := o.Gateway.Reload(); errors.Is(err, ErrPinned) {
			writeError(w, http.StatusConflict, "pinned", err.Error())
			return
		} else if err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
				"error":    "the new configuration was refused; the previous one keeps serving",
				"reason":   "invalid_config",
				"problems": strings.Split(err.Error(), "\n"),
			})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"result": "applied"})
	})
	if o.Apps != nil {
		appRoutes(mux, o.Apps)
	}
	if o.Cluster != nil {
		clusterRoutes(mux, o.Cluster)
	}
	if o.Docs != nil {
		openAPIRoute(mux, o.Docs)
	}
	if o.DataAPIs != nil {
		dataAPIRoutes(mux, o.DataAPIs)
	}
	if o.Profiles != nil {
		profileRoutes(mux, o.Profiles)
	}
	if o.Operator != nil {
		operatorRoutes(mux, o.Operator)
	}
	if o.Reloads != nil {
		reloadRoutes(mux, o.Reloads)
	}
	if o.Rollbacks != nil {
		rollbackRoutes(mux, o.Rollbacks)
	}
	uiRoutes(mux, o.Gatherer)
	tokenRoute(mux, o.Tokens)
	finishDoc := adminDocRoute(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no admin endpoint at "+r.URL.Path)
	})
	finishDoc()
	return mux, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, reason, msg string) {
	writeJSON(w, status, map[string]string{"error": msg, "reason": reason})
}
