package gateway

import (
	"maps"
	"slices"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/proxy"
)

// routeSteps gives rt what its route does besides forwarding (config's
// headers, redirect, respond and cors; proxy's headers.go, direct.go and
// cors.go). A route that answers itself gets a placeholder upstream, which
// no endpoint or admission limit stands behind.
func routeSteps(rc *config.Route, rt *proxy.Route) error {
	if h := rc.Headers; h != nil {
		req, err := headerOps(h.Request)
		if err != nil {
			return err
		}
		resp, err := headerOps(h.Response)
		if err != nil {
			return err
		}
		if req != nil || resp != nil {
			rt.Headers = &proxy.Headers{Request: req, Response: resp}
		}
	}
	switch {
	case rc.Redirect != nil:
		rd := rc.Redirect
		r, err := proxy.NewRedirect(rd.Status, rd.To, rd.HTTPS, rd.StripQuery)
		if err != nil {
			return err
		}
		rt.Direct = &proxy.Direct{Redirect: r}
	case rc.Respond != nil:
		rt.Direct = &proxy.Direct{Respond: proxy.NewRespond(rc.Respond.Status, rc.Respond.Body, rc.Respond.ContentType)}
	}
	if rt.Direct != nil {
		rt.Upstream = &proxy.Upstream{}
	}
	if c := rc.CORS; c != nil {
		cors, err := proxy.NewCORS(proxy.CORSOptions{AllowOrigins: c.AllowOrigins, AllowMethods: c.AllowMethods,
			AllowHeaders: c.AllowHeaders, ExposeHeaders: c.ExposeHeaders, MaxAge: c.MaxAge, AllowCredentials: c.AllowCredentials})
		if err != nil {
			return err
		}
		rt.CORS = cors
	}
	return nil
}

// headerOps compiles one direction's header changes; nil for none.
func headerOps(c *config.HeaderChanges) (*proxy.HeaderOps, error) {
	if c == nil || len(c.Set)+len(c.Add)+len(c.Remove) == 0 {
		return nil, nil
	}
	o := &proxy.HeaderOps{Remove: c.Remove}
	for _, list := range []struct {
		from map[string]string
		to   *[]proxy.HeaderOp
	}{{c.Set, &o.Set}, {c.Add, &o.Add}} {
		for _, name := range slices.Sorted(maps.Keys(list.from)) {
			op, err := proxy.NewHeaderOp(name, list.from[name])
			if err != nil {
				return nil, err
			}
			*list.to = append(*list.to, op)
		}
	}
	return o, nil
}
