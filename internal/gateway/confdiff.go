package gateway

import (
	"slices"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/health"
)

// Config diffs compare typed values with == (or slices.Equal for the few
// slices), never reflect and never a printed description: a field added to
// a compared struct is compared by the compiler's ==, so it cannot be left
// out of a diff by accident.

// pickerKey is the comparable part of what a picker is built from. The
// balancer option structs are embedded whole (as values, with a flag for
// nil), so a new option field is compared without touching this code;
// TestPickerKeyCoversBalancerOptions fails when one is not.
type pickerKey struct {
	balancer          string
	hasLeastRequest   bool
	leastRequest      config.LeastRequest
	hasConsistentHash bool
	consistentHash    config.ConsistentHash
	zones             zonesKey
	panic             bool
}

// zonesKey is config.Zones without its Failover slice (kept beside the key
// in pickerInputs), so that it stays comparable.
type zonesKey struct {
	set              bool
	local            string
	overprovisioning float64
}

// pickerEndpoint is what one endpoint contributes to a picker: its
// address, configured and effective weight, zone and health.
type pickerEndpoint struct {
	address   string
	weight    uint32 // configured
	effective uint32
	zone      string
	healthy   bool
}

// pickerInputs is everything a picker is built from. A reload (or another
// upstream's update) keeps an upstream's picker exactly when its inputs
// are equal.
type pickerInputs struct {
	key       pickerKey
	failover  []string
	endpoints []pickerEndpoint
}

// newPickerInputs collects uc's balancer settings and zones, the plan's
// panic mode, and each endpoint of plan (base are the configured ones,
// parallel) in order.
func newPickerInputs(uc *config.Upstream, base []*endpoint.Endpoint, plan health.Plan) pickerInputs {
	in := pickerInputs{key: pickerKey{balancer: uc.Balancer, panic: plan.Panic}}
	if lr := uc.LeastRequest; lr != nil {
		in.key.hasLeastRequest, in.key.leastRequest = true, *lr
	}
	if ch := uc.ConsistentHash; ch != nil {
		in.key.hasConsistentHash, in.key.consistentHash = true, *ch
	}
	if z := uc.Zones; z != nil {
		in.key.zones = zonesKey{set: true, local: z.Local, overprovisioning: z.Overprovisioning}
		in.failover = slices.Clone(z.Failover)
	}
	in.endpoints = make([]pickerEndpoint, len(plan.Endpoints))
	for i, e := range plan.Endpoints {
		in.endpoints[i] = pickerEndpoint{address: e.Address, weight: base[i].Weight, effective: e.Weight, zone: e.Zone, healthy: plan.Healthy[i]}
	}
	return in
}

// equal reports whether a picker built from a would be built from b.
func (a pickerInputs) equal(b pickerInputs) bool {
	return a.key == b.key && slices.Equal(a.failover, b.failover) && slices.Equal(a.endpoints, b.endpoints)
}

// sameDiscovery reports whether a and b configure the same discovery
// source and guard.
func sameDiscovery(a, b config.Discovery) bool {
	ea, eb := a.Etcd, b.Etcd
	a.Etcd, b.Etcd = nil, nil
	da, db, sa, sb := a.DNS, b.DNS, a.DNSSRV, b.DNSSRV
	a.DNS, b.DNS, a.DNSSRV, b.DNSSRV = nil, nil, nil, nil
	if a != b || (ea == nil) != (eb == nil) || (da == nil) != (db == nil) || (sa == nil) != (sb == nil) {
		return false
	}
	if da != nil && *da != *db || sa != nil && *sa != *sb {
		return false
	}
	return ea == nil || sameEtcd(*ea, *eb)
}

// sameEtcd compares field by field: EtcdDiscovery holds a slice, so it is
// not comparable. TestSameDiscoveryCoversFields fails when a field is
// added here and not compared.
func sameEtcd(a, b config.EtcdDiscovery) bool {
	return a.Prefix == b.Prefix && a.DialTimeout == b.DialTimeout &&
		(a.Endpoints == nil) == (b.Endpoints == nil) && slices.Equal(a.Endpoints, b.Endpoints)
}

// checkReloadable refuses a next configuration that changes a field a
// reload cannot apply. Which fields those are is not written here: each
// field's table entry in internal/config says whether a change to it is
// applied by a reload or needs a restart, and config.ReloadRefusals
// applies those entries (listen, admin.listen, memory,
// server.underscores_in_headers, cluster, and tls turned on or off today).
func (g *Gateway) checkReloadable(next *config.Config) error {
	if errs := config.ReloadRefusals(g.cfg, next); len(errs) > 0 {
		return &errs
	}
	return nil
}
