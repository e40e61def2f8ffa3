package gateway

import (
	"fmt"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/dataapi"
	"github.com/levee-gw/levee/internal/dataquery"
)

// dataBindings are a data route's values bound to the caller's identity
// (`params.<name>.from`, `row_filter`): the forwarder fills them from the
// verified caller (dataapi/bind.go).
func dataBindings(d *config.RouteData) ([]dataapi.Binding, error) {
	var out []dataapi.Binding
	for _, name := range d.ParamOrder {
		p := d.Params[name]
		if p == nil || p.From == "" {
			continue
		}
		fr, err := dataquery.ParseFrom(p.From)
		if err != nil {
			return nil, fmt.Errorf("params.%s.from: %w", name, err)
		}
		out = append(out, dataapi.Binding{Name: name, From: fr})
	}
	for _, rf := range d.RowFilter {
		fr, err := dataquery.ParseFrom(rf.From)
		if err != nil {
			return nil, fmt.Errorf("row_filter %s: %w", rf.Column, err)
		}
		out = append(out, dataapi.Binding{Name: rf.Column, From: fr})
	}
	return out, nil
}

// boundClaims are the JWT claims route rc binds: its issuers keep these
// of each verified token, and no others (nil: none, at no cost).
func boundClaims(rc *config.Route) []string {
	if rc.Data == nil {
		return nil
	}
	return rc.Data.BoundClaims()
}
