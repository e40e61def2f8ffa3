package config

import (
	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// routeSteps reads what a route does besides forwarding (its headers,
// redirect, respond and cors) and checks that a route answering itself
// has no upstream or data. It returns false when the route answers itself
// (redirect or respond, or a conflict already reported): the reader then
// skips the upstream/data rule.
func (p *parser) routeSteps(r *Route, path string, n *yaml.Node, f map[string]*yaml.Node) bool {
	if v := f["headers"]; v != nil {
		r.Headers = p.routeHeaders(engine.Key(path, "headers"), v)
	}
	if v := f["cors"]; v != nil {
		r.CORS = p.routeCORS(engine.Key(path, "cors"), v)
	}
	var direct []string
	for _, k := range []string{"upstream", "split", "data", "redirect", "respond"} {
		if f[k] != nil {
			direct = append(direct, k)
		}
	}
	rd, rs := f["redirect"], f["respond"]
	if rd == nil && rs == nil {
		return true
	}
	if len(direct) > 1 {
		p.Add(n, path, "a route has exactly one of upstream, split, data, redirect and respond, got %s and %s", direct[0], direct[1])
		return false
	}
	if v := f["retry"]; v != nil {
		p.Add(v, engine.Key(path, "retry"), "a route that answers itself (redirect or respond) has no retry")
	}
	if rd != nil {
		r.Redirect = p.redirect(engine.Key(path, "redirect"), rd)
	} else {
		r.Respond = p.respond(engine.Key(path, "respond"), rs)
	}
	return false
}
