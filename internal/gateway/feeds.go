package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/discovery"
	"github.com/levee-gw/levee/internal/endpoint"
)

// feed is one upstream's discovery.Feed with the configuration it was
// built from, so that a reload can tell whether it changes the feed. The
// feed itself (guard, snapshot, source goroutines, locking) lives in
// internal/discovery; the gateway only turns config into its options,
// keeps feeds across reloads and swaps the upstream's Balance when one applies.
type feed struct {
	*discovery.Feed
	upstream string
	cfg      config.Discovery
}

// newFeed builds (without starting) the feed of upstream name.
func (g *Gateway) newFeed(name string, uc *config.Upstream, stateDir string) (*feed, error) {
	d := uc.Discovery
	o := discovery.FeedOptions{
		Upstream:   name,
		Limits:     feedLimits(d),
		Guard:      discovery.GuardOptions{MaxDropFraction: d.MaxDropFraction, ConfirmAfter: d.ConfirmAfter},
		SourceName: sourceName(d),
		StateDir:   stateDir,
		Metrics:    g.discoveryMetrics,
		Logger:     g.logger.With("upstream", name),
		Applied:    func() { g.refresh([]string{name}, "a discovery update") },
		// The automatic rollback (rollback_changes.go): a pinned set is
		// refused; an applied one is a version, watched.
		Admit: func(list []discovery.Instance, by string) error { return g.admitEndpoints(name, list, by) },
	}
	var self *discovery.Feed
	o.Changed = func(prev, next []discovery.Instance, by string) { g.endpointsChanged(name, self, prev, next, by) }
	for _, ec := range uc.Endpoints {
		o.Static = append(o.Static, discovery.Instance{Address: ec.Address, Weight: ec.Weight * endpoint.WeightScale, Zone: ec.Zone})
	}
	if err := o.Guard.Validate(); err != nil {
		return nil, fmt.Errorf("upstreams.%s.discovery: discovery guard: %w", name, err)
	}
	var err error
	switch {
	case d.File != "":
		o.Source, err = discovery.NewFileSource(d.File, discovery.FileOptions{Limits: o.Limits})
	case d.Etcd != nil:
		o.Source, err = discovery.NewEtcdSource(discovery.EtcdOptions{Endpoints: d.Etcd.Endpoints, Prefix: d.Etcd.Prefix, DialTimeout: d.Etcd.DialTimeout, Limits: o.Limits})
	case d.DNS != nil || d.DNSSRV != nil:
		o.Source, err = newDNSSource(d, o.Limits)
	}
	if err != nil {
		return nil, fmt.Errorf("upstreams.%s.discovery: %w", name, err)
	}
	f, err := discovery.NewFeed(o)
	if err != nil {
		return nil, fmt.Errorf("upstreams.%s.discovery: %w", name, err)
	}
	self = f
	return &feed{Feed: f, upstream: name, cfg: *d}, nil
}

// feedLimits are the discovery firewall's limits of d.
func feedLimits(d *config.Discovery) discovery.Limits {
	return discovery.Limits{MaxWeight: d.MaxWeight}
}

// sourceName names where a feed's instances come from.
func sourceName(d *config.Discovery) string {
	switch {
	case d.File != "":
		return "file:" + d.File
	case d.Etcd != nil:
		return "etcd:" + d.Etcd.Prefix
	case d.DNS != nil:
		return "dns:" + d.DNS.Name
	case d.DNSSRV != nil:
		return "dns_srv:" + d.DNSSRV.Name
	}
	return "push"
}

// newDNSSource is the source of a dns or dns_srv block (config has
// checked the name, port and resolver).
func newDNSSource(d *config.Discovery, limits discovery.Limits) (discovery.Source, error) {
	if s := d.DNSSRV; s != nil {
		return discovery.NewDNSSource(discovery.DNSOptions{SRV: s.Name, Zone: s.Zone, Resolver: s.Resolver, Timeout: s.Timeout, Limits: limits})
	}
	host, portStr, err := net.SplitHostPort(d.DNS.Name)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, err
	}
	return discovery.NewDNSSource(discovery.DNSOptions{Host: host, Port: uint16(port), Weight: d.DNS.Weight, Zone: d.DNS.Zone,
		Resolver: d.DNS.Resolver, Timeout: d.DNS.Timeout, Limits: limits})
}

// sameConfig reports whether a reload leaves this feed's source alone.
func (f *feed) sameConfig(uc *config.Upstream) bool {
	return uc.Discovery != nil && sameDiscovery(f.cfg, *uc.Discovery)
}

// reconcileFeeds returns the feeds cfg needs: the current feed of an
// upstream whose discovery settings did not change is kept (its source
// keeps running); others are built fresh (not started). retired are the
// current feeds no longer used; the caller stops them after releasing g.mu.
// Called with g.reloadMu held (or before Start), not g.mu: building a feed
// reads its snapshot from disk.
func (g *Gateway) reconcileFeeds(cfg *config.Config, current map[string]*feed) (next map[string]*feed, fresh, retired []*feed, err error) {
	next = map[string]*feed{}
	for _, name := range cfg.UpstreamOrder {
		uc := cfg.Upstreams[name]
		if uc.Discovery == nil {
			continue
		}
		if f, ok := current[name]; ok && f.sameConfig(uc) {
			next[name] = f
			continue
		}
		f, ferr := g.newFeed(name, uc, cfg.StateDir)
		if ferr != nil {
			return nil, nil, nil, ferr
		}
		next[name] = f
		fresh = append(fresh, f)
	}
	for name, f := range current {
		if next[name] != f {
			retired = append(retired, f)
		}
	}
	return next, fresh, retired, nil
}

// refresh swaps the Balance of each named upstream after a feed applied
// an update or an endpoint's health changed (why says which), so new
// requests use the new endpoint set at once. Only those upstreams are
// touched: the table, its routes and their metrics stay, and so does every
// other upstream's picker. A name the current table does not have (an
// upstream a reload just removed) is skipped.
func (g *Gateway) refresh(names []string, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.handler.Table()
	for _, name := range names {
		up, uc := t.Upstream(name), g.cfg.Upstreams[name]
		if up == nil || uc == nil {
			continue
		}
		eps := g.endpoints(name, uc)
		g.pools.retainStats(name, eps)
		up.SetBalance(g.balance(name, uc, eps))
		g.logger.Debug("upstream endpoints swapped", "upstream", name, "after", why, "endpoints", len(eps))
	}
}

// view is the feed's state for the admin API.
func (f *feed) view() *admin.DiscoveryView {
	s := f.State()
	v := &admin.DiscoveryView{
		Source: f.SourceName(), ServingFrom: s.Origin, Updated: s.Updated, LastError: s.LastErr,
		Quarantined: rejectionViews(s.Rejected[:min(len(s.Rejected), admin.MaxQuarantinedShown)]), QuarantinedTotal: len(s.Rejected),
	}
	if h := s.Held; h != nil {
		v.Held = &admin.HeldView{Since: h.Since, DropFraction: h.DropFraction, Instances: len(h.Instances),
			ConfirmWith: "POST /api/v1/upstreams/" + f.upstream + "/confirm"}
	}
	return v
}

// PushEndpoints offers an endpoint list sent to the admin API to upstream
// name's push feed. (Moved here from build.go.)
func (v adminView) PushEndpoints(ctx context.Context, name string, body []byte) (admin.PushResult, error) {
	f := v.feed(name)
	if f == nil || !f.TakesPushes() {
		return admin.PushResult{}, admin.ErrNotPushUpstream
	}
	if s := v.g.etcd.store.Load(); s != nil {
		return f.pushShared(ctx, v.g, s, body)
	}
	return pushOutcome(f.Push(body, time.Now()))
}

// pushOutcome is a feed's push result as the admin API's.
func pushOutcome(res discovery.PushResult, err error) (admin.PushResult, error) {
	if errors.Is(err, admin.ErrPinned) {
		return admin.PushResult{}, err
	}
	if err != nil {
		code := ""
		var pe *discovery.PayloadError
		if errors.As(err, &pe) {
			code = pe.Code
		}
		return admin.PushResult{}, &admin.PushRefusedError{Reason: code, Err: err, Rejected: rejectionViews(res.Rejected)}
	}
	return admin.PushResult{Held: res.Decision.Action == discovery.Hold, DropFraction: res.Decision.DropFraction,
		Instances: res.Instances, Rejected: rejectionViews(res.Rejected)}, nil
}

// ConfirmUpstream applies the update held by name's delta guard. (Moved
// here from build.go.)
func (v adminView) ConfirmUpstream(ctx context.Context, name string) (admin.ConfirmResult, error) {
	f := v.feed(name)
	if f == nil {
		return admin.ConfirmResult{}, admin.ErrNoFeed
	}
	if err := v.g.checkConfirmPinned(f); err != nil {
		return admin.ConfirmResult{}, err
	}
	if s := v.g.etcd.store.Load(); s != nil && f.TakesPushes() {
		return f.confirmShared(ctx, s)
	}
	d, ok := f.Confirm(time.Now())
	if !ok {
		return admin.ConfirmResult{}, admin.ErrNothingHeld
	}
	return admin.ConfirmResult{DropFraction: d.DropFraction, HeldFor: d.HeldFor}, nil
}

func rejectionViews(rs []discovery.Rejection) []admin.QuarantineView {
	out := make([]admin.QuarantineView, 0, len(rs))
	for _, r := range rs {
		out = append(out, admin.QuarantineView{Key: r.Key, Reason: string(r.Reason), Field: r.Field, Raw: r.Raw, Message: r.Message})
	}
	return out
}
