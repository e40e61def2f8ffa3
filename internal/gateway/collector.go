package gateway

import (
	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/dataapis"
	"github.com/levee-gw/levee/internal/h1server"
	"github.com/levee-gw/levee/internal/health"
	"github.com/levee-gw/levee/internal/memguard"
	"github.com/levee-gw/levee/internal/netlimit"
)

// registerCollectors registers the scrape-time collectors of the packages
// whose state the gateway holds: each package declares its own series
// beside its stats (admission, health, h1server, memguard); the gateway only
// tells each one where to look (the table serving at scrape time, the
// data server once Start made it).
func (g *Gateway) registerCollectors(endpointLabels int) error {
	limiters := func(yield func(string, *admission.Limiter) bool) {
		for _, up := range g.handler.Table().Upstreams() {
			if up.Admission != nil && !yield(up.Name, up.Admission) {
				return
			}
		}
	}
	upstreams := func(yield func(string) bool) {
		for _, up := range g.handler.Table().Upstreams() {
			if !yield(up.Name) {
				return
			}
		}
	}
	endpoints := func(yield func(health.UpstreamEndpoints) bool) {
		for _, up := range g.handler.Table().Upstreams() {
			if b := up.Balance(); b != nil && !yield(health.UpstreamEndpoints{Name: up.Name, Endpoints: b.Endpoints}) {
				return
			}
		}
	}
	if err := g.registry.Register(admission.NewCollector(limiters)); err != nil {
		return err
	}
	if g.memory != nil {
		if err := g.registry.Register(memguard.NewCollector(g.memory)); err != nil {
			return err
		}
	}
	if err := g.registry.Register(health.NewCollector(g.health, upstreams)); err != nil {
		return err
	}
	if err := g.registry.Register(health.NewEndpointCollector(g.health, endpoints, endpointLabels)); err != nil {
		return err
	}
	dataAPIs := func() dataapis.Backend {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.dataAPIs.store
	}
	if err := g.registry.Register(dataapis.NewCollector(dataAPIs)); err != nil {
		return err
	}
	if err := g.registry.Register(dataapis.NewFleetCollector(g.fleetStatus)); err != nil {
		return err
	}
	if err := g.registry.Register(netlimit.NewCollector(g.dataLimit.Load)); err != nil {
		return err
	}
	if err := g.registry.Register(h1server.NewExpiryCollector(g.certExpiries)); err != nil {
		return err
	}
	return g.registry.Register(h1server.NewCollector(g.h1.Load))
}
