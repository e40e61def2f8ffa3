package gateway

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/health"
)

// upstreamPickerFields classifies every field of config.Upstream: true
// when a picker is built from it (and pickerInputs must compare it),
// false when it is not. A field added to config.Upstream fails
// TestPickerKeyCoversBalancerOptions until it is classified here, so a new
// balancer option cannot be silently left out of the reload diff.
var upstreamPickerFields = map[string]bool{
	"Name": false, "Balancer": true, "LeastRequest": true, "ConsistentHash": true,
	"Discovery": false, "Limits": false,
	"Endpoints": false, // reaches the picker through base and the plan, compared per endpoint
	"Timeouts":  false, "MaxIdleConnsPerEndpoint": false, "Retry": false,
	"HealthCheck": false, "OutlierDetection": false,
	"PanicThreshold": false, // reaches the picker as plan.Panic
	"SlowStart":      false, // reaches the picker as effective weights
	"Zones":          true,
	"TLS":            false, // the transport's (pools.transport), not the picker's
	"Protocol":       false, // the transport's (upstream_h2.go), not the picker's
	"HTTP2":          false, // the HTTP/2 pool's limits, not the picker's
}

// bump returns a value of v's type different from v, for the kinds that
// configuration option structs use.
func bump(t *testing.T, v reflect.Value) reflect.Value {
	t.Helper()
	out := reflect.New(v.Type()).Elem()
	switch v.Kind() {
	case reflect.String:
		out.SetString(v.String() + "x")
	case reflect.Bool:
		out.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		out.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		out.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		out.SetFloat(v.Float() + 0.5)
	case reflect.Slice:
		out = reflect.Append(reflect.AppendSlice(reflect.MakeSlice(v.Type(), 0, v.Len()+1), v), bump(t, reflect.New(v.Type().Elem()).Elem()))
	case reflect.Pointer:
		if v.IsNil() {
			out.Set(reflect.New(v.Type().Elem()))
		} else {
			out.Set(reflect.Zero(v.Type()))
		}
	default:
		t.Fatalf("bump: no rule for kind %s (%s); extend the test", v.Kind(), v.Type())
	}
	return out
}

// eachFieldChanged calls f with a copy of base whose field alone is
// changed, for every field of base's struct type that keep accepts (every
// field when keep is nil).
func eachFieldChanged[T any](t *testing.T, base T, keep func(name string) bool, f func(name string, changed T)) {
	t.Helper()
	rt := reflect.TypeFor[T]()
	for i := range rt.NumField() {
		if keep != nil && !keep(rt.Field(i).Name) {
			continue
		}
		c := base
		fv := reflect.ValueOf(&c).Elem().Field(i)
		fv.Set(bump(t, fv))
		f(rt.Field(i).Name, c)
	}
}

func TestPickerKeyCoversBalancerOptions(t *testing.T) {
	for _, sf := range reflect.VisibleFields(reflect.TypeFor[config.Upstream]()) {
		if _, ok := upstreamPickerFields[sf.Name]; !ok {
			t.Errorf("config.Upstream.%s is not classified in upstreamPickerFields: say whether a picker is built from it (and if so compare it in pickerInputs)", sf.Name)
		}
	}
	eps := []*endpoint.Endpoint{{Address: "127.0.0.1:1", Weight: 100, Zone: "a"}, {Address: "127.0.0.1:2", Weight: 200, Zone: "b"}}
	plan := health.Plan{Endpoints: eps, Healthy: []bool{true, true}}
	base := config.Upstream{
		Balancer:       config.BalancerLeastRequest,
		LeastRequest:   &config.LeastRequest{EWMA: true, Tau: 10 * time.Second},
		ConsistentHash: &config.ConsistentHash{HashOn: "header:X-User"},
		Zones:          &config.Zones{Local: "a", Failover: []string{"b"}, Overprovisioning: 1.4},
	}
	in := func(uc config.Upstream) pickerInputs { return newPickerInputs(&uc, eps, plan) }
	if !in(base).equal(in(base)) {
		t.Fatal("the same upstream gives unequal picker inputs")
	}
	differs := func(what string, uc config.Upstream) {
		t.Helper()
		if in(base).equal(in(uc)) {
			t.Errorf("changing %s leaves the picker inputs equal: a reload would keep the old picker", what)
		}
	}
	isPicker := func(name string) bool { return upstreamPickerFields[name] }
	eachFieldChanged(t, base, isPicker, func(name string, uc config.Upstream) {
		differs("Upstream."+name, uc)
	})
	eachFieldChanged(t, *base.LeastRequest, nil, func(name string, lr config.LeastRequest) {
		uc := base
		uc.LeastRequest = &lr
		differs("LeastRequest."+name, uc)
	})
	eachFieldChanged(t, *base.ConsistentHash, nil, func(name string, ch config.ConsistentHash) {
		uc := base
		uc.ConsistentHash = &ch
		differs("ConsistentHash."+name, uc)
	})
	eachFieldChanged(t, *base.Zones, nil, func(name string, z config.Zones) {
		uc := base
		uc.Zones = &z
		differs("Zones."+name, uc)
	})
	// The plan and the endpoints.
	notStats := func(name string) bool { return name != "Stats" } // live counters, shared across pickers
	eachFieldChanged(t, *eps[1], notStats, func(name string, e endpoint.Endpoint) {
		p := plan
		p.Endpoints = []*endpoint.Endpoint{eps[0], &e}
		if newPickerInputs(&base, eps, plan).equal(newPickerInputs(&base, []*endpoint.Endpoint{eps[0], &e}, p)) {
			t.Errorf("changing endpoint.%s leaves the picker inputs equal", name)
		}
	})
	for _, p := range []health.Plan{
		{Endpoints: eps, Healthy: []bool{true, false}},
		{Endpoints: eps, Healthy: []bool{true, true}, Panic: true},
		{Endpoints: []*endpoint.Endpoint{eps[0], {Address: eps[1].Address, Weight: 50, Zone: "b"}}, Healthy: []bool{true, true}},
		{Endpoints: eps[:1], Healthy: []bool{true}},
	} {
		if newPickerInputs(&base, eps, plan).equal(newPickerInputs(&base, eps, p)) {
			t.Errorf("plan %+v leaves the picker inputs equal", p)
		}
	}
}

func TestSameDiscoveryCoversFields(t *testing.T) {
	base := config.Discovery{File: "/x", Etcd: &config.EtcdDiscovery{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/p/", DialTimeout: time.Second},
		DNS:             &config.DNSDiscovery{Name: "a.test:80", Weight: 1, Zone: "z", Resolver: "127.0.0.1:53", Timeout: time.Second},
		DNSSRV:          &config.DNSSRVDiscovery{Name: "_h._tcp.a.test", Zone: "z", Resolver: "127.0.0.1:53", Timeout: time.Second},
		MaxDropFraction: 0.5, ConfirmAfter: time.Second, MaxWeight: 10}
	cp := base
	etcd, dnsc, srv := *base.Etcd, *base.DNS, *base.DNSSRV
	cp.Etcd, cp.DNS, cp.DNSSRV = &etcd, &dnsc, &srv
	if !sameDiscovery(base, cp) {
		t.Fatal("equal discovery settings (distinct pointers) compare unequal")
	}
	eachFieldChanged(t, base, nil, func(name string, d config.Discovery) {
		if sameDiscovery(base, d) {
			t.Errorf("changing Discovery.%s leaves it the same", name)
		}
	})
	eachFieldChanged(t, *base.Etcd, nil, func(name string, e config.EtcdDiscovery) {
		d := base
		d.Etcd = &e
		if sameDiscovery(base, d) {
			t.Errorf("changing Discovery.Etcd.%s leaves it the same", name)
		}
	})
	eachFieldChanged(t, *base.DNS, nil, func(name string, x config.DNSDiscovery) {
		d := base
		d.DNS = &x
		if sameDiscovery(base, d) {
			t.Errorf("changing Discovery.DNS.%s leaves it the same", name)
		}
	})
	eachFieldChanged(t, *base.DNSSRV, nil, func(name string, x config.DNSSRVDiscovery) {
		d := base
		d.DNSSRV = &x
		if sameDiscovery(base, d) {
			t.Errorf("changing Discovery.DNSSRV.%s leaves it the same", name)
		}
	})
	// nil and empty etcd endpoints differ, as reflect.DeepEqual had them.
	d := base
	d.Etcd = &config.EtcdDiscovery{Endpoints: []string{}, Prefix: "/p/", DialTimeout: time.Second}
	e := base
	e.Etcd = &config.EtcdDiscovery{Prefix: "/p/", DialTimeout: time.Second}
	if sameDiscovery(d, e) {
		t.Error("nil and empty etcd endpoints compare the same")
	}
}

// TestSameMemory: the derived reload rule treats memory as it always did
// (a restart for any change): nil and nil, or equal values, are the same;
// nil against a block, or any one field changed, is a change refused at
// "memory".
func TestSameMemory(t *testing.T) {
	m := config.Memory{Limit: 1 << 30, SoftWatermark: 0.8, HardWatermark: 0.9}
	m2 := m
	sameMemory := func(a, b *config.Memory) bool {
		ca, cb := &config.Config{Memory: a}, &config.Config{Memory: b}
		errs := config.ReloadRefusals(ca, cb)
		for _, e := range errs {
			if e.Path != "memory" || e.Message != "cannot change on reload (restart levee)" {
				t.Errorf("unexpected refusal %v", e)
			}
		}
		return len(errs) == 0
	}
	if !sameMemory(nil, nil) || !sameMemory(&m, &m2) || sameMemory(&m, nil) || sameMemory(nil, &m) {
		t.Error("sameMemory: nil or equal values misjudged")
	}
	eachFieldChanged(t, m, nil, func(name string, c config.Memory) {
		if sameMemory(&m, &c) {
			t.Errorf("changing Memory.%s leaves it the same", name)
		}
	})
}

// TestReloadRebuildsPickerOnBalancerChange: a reload that changes any
// balancer option builds the upstream a new picker (and one that changes
// nothing keeps it), over a real gateway.
func TestReloadRebuildsPickerOnBalancerChange(t *testing.T) {
	a := newCountingBackend(t)
	conf := func(balancer string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  one:
    endpoints: [{address: %s}]
%s
routes:
  - {name: one, match: {path_prefix: /}, upstream: one}
`, hostPort(a.srv), balancer)
	}
	steps := []struct{ name, balancer string }{
		{"weighted_round_robin", "    balancer: weighted_round_robin"},
		{"least_request", "    balancer: least_request"},
		{"least_request ewma", "    balancer: least_request\n    least_request: {ewma: true}"},
		{"least_request tau", "    balancer: least_request\n    least_request: {ewma: true, tau: 20s}"},
		{"consistent_hash", "    balancer: consistent_hash\n    consistent_hash: {hash_on: \"header:X-User\"}"},
		{"consistent_hash hash_on", "    balancer: consistent_hash\n    consistent_hash: {hash_on: \"header:X-Other\"}"},
		{"weighted_round_robin again", "    balancer: weighted_round_robin"},
	}
	h := start(t, conf(steps[0].balancer))
	picker := func() any {
		for _, up := range h.g.handler.Table().Upstreams() {
			if up.Name == "one" {
				return up.Balance().Picker
			}
		}
		t.Fatal("no upstream one")
		return nil
	}
	reload := func(balancer string) {
		t.Helper()
		h.writeConfig(conf(balancer))
		if err := h.g.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	prev := picker()
	for _, s := range steps[1:] {
		reload(s.balancer)
		if got := picker(); got == prev {
			t.Errorf("reload to %s kept the old picker", s.name)
		} else {
			prev = got
		}
		reload(s.balancer)
		if picker() != prev {
			t.Errorf("reload leaving %s unchanged built a new picker", s.name)
		}
	}
}
