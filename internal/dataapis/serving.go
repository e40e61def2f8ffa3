package dataapis

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// What serves: the file's routes that are not data routes plus the
// store's published versions, each read as an ordinary route under the
// file's configuration (docs/data-apis.md, "Lifecycle"). The rules are
// here, with the store; the gateway says how to read its routes (Routes:
// config.Route and config's parser; this package never imports config).

// Conflict is two routes that may not serve together: their indexes in
// the routes checked and why (config.RouteConflict).
type Conflict struct {
	Route, Other int
	Message      string
}

// Routes are the gateway's ways with its route type R.
type Routes[R any] struct {
	// Parse reads a stored definition as data API name's route.
	Parse func(name string, def []byte) (R, error)
	// Name is a route's name; Data reports whether it is a data route.
	Name func(R) string
	Data func(R) bool
	// Conflicts lists the conflicts among routes that are to serve
	// together (none: they may).
	Conflicts func([]R) []Conflict
}

// Effective returns file's routes with its data routes replaced by the
// store's published versions (snap nil: file as it is), in the file's
// order: a file data route's published version takes its place (none
// while it is offline or deleted), and the APIs only the store knows
// follow the file's routes, in name order. A published version that does
// not read as a data route of file (its data source is gone, say) or that
// collides with a route that serves is left out: each such problem is
// returned, naming the API.
func (rs Routes[R]) Effective(file []R, snap *Snapshot) ([]R, []string) {
	if snap == nil {
		return file, nil
	}
	var problems []string
	served := make(map[string]*R, len(snap.Serving))
	for _, sv := range snap.Serving {
		r, err := rs.Parse(sv.Name, sv.Definition)
		if err != nil {
			problems = append(problems, fmt.Sprintf("data API %s version %d does not serve: %s", sv.Name, sv.Version, oneLine(err)))
			continue
		}
		served[sv.Name] = &r
	}
	eff := make([]R, 0, len(file)+len(snap.Serving))
	fromStore := map[int]bool{} // indexes in eff of the store's versions
	placed := map[string]bool{}
	for _, r := range file {
		if !rs.Data(r) {
			eff = append(eff, r)
			continue
		}
		if v := served[rs.Name(r)]; v != nil {
			fromStore[len(eff)] = true
			eff = append(eff, *v)
			placed[rs.Name(r)] = true
		}
	}
	for _, sv := range snap.Serving {
		if v := served[sv.Name]; v != nil && !placed[sv.Name] {
			fromStore[len(eff)] = true
			eff = append(eff, *v)
		}
	}
	return rs.dropConflicts(eff, fromStore, problems)
}

// dropConflicts leaves out of eff each data API that collides with
// another route. The file's own routes never collide with each other
// (config.Parse refused that), so one route of each conflict is from the
// store (fromStore): that one goes, the later one when both are.
func (rs Routes[R]) dropConflicts(eff []R, fromStore map[int]bool, problems []string) ([]R, []string) {
	conflicts := rs.Conflicts(eff)
	if len(conflicts) == 0 {
		return eff, problems
	}
	drop := make(map[int]bool, len(conflicts))
	for _, c := range conflicts {
		i := c.Route
		if !fromStore[i] && fromStore[c.Other] {
			i = c.Other
		}
		if drop[i] {
			continue
		}
		drop[i] = true
		problems = append(problems, fmt.Sprintf("data API %s does not serve: %s", rs.Name(eff[i]), c.Message))
	}
	kept := make([]R, 0, len(eff)-len(drop))
	for i, r := range eff {
		if !drop[i] {
			kept = append(kept, r)
		}
	}
	return kept, problems
}

// CheckReload refuses a reload under which a data API changed at runtime
// would stop serving: every published version that seeding will leave as
// it is (created through the admin API, or overridden) must still read as
// a data route of the new file and collide with none of its routes. The
// file's own data routes are the file's to validate (and seeding applies
// them); a file data route whose name the runtime owns is left out, as
// seeding leaves it out.
func (rs Routes[R]) CheckReload(file []R, snap *Snapshot) error {
	if snap == nil || len(snap.Runtime) == 0 {
		return nil
	}
	eff := make([]R, 0, len(file)+len(snap.Serving))
	for _, r := range file {
		if !rs.Data(r) || !snap.Runtime[rs.Name(r)] {
			eff = append(eff, r)
		}
	}
	var problems []string
	for _, sv := range snap.Serving {
		if !snap.Runtime[sv.Name] {
			continue
		}
		r, err := rs.Parse(sv.Name, sv.Definition)
		if err != nil {
			problems = append(problems, fmt.Sprintf("data API %s version %d (changed at runtime) would not serve: %s", sv.Name, sv.Version, oneLine(err)))
			continue
		}
		eff = append(eff, r)
	}
	for _, c := range rs.Conflicts(eff) {
		problems = append(problems, fmt.Sprintf("data API %s (changed at runtime) would not serve: %s", rs.Name(eff[c.Route]), c.Message))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n") + "\n(take those data APIs offline or delete them through the admin API first, or keep what they need in the file)")
	}
	return nil
}

// PublishConflict returns why r, data API name's version to publish,
// cannot serve beside cur (the routes serving, name's own left out), and
// ok false when it can.
func (rs Routes[R]) PublishConflict(cur []R, name string, r R) (why string, ok bool) {
	routes := make([]R, 0, len(cur)+1)
	for _, rc := range cur {
		if rs.Name(rc) != name {
			routes = append(routes, rc)
		}
	}
	routes = append(routes, r)
	for _, c := range rs.Conflicts(routes) {
		if c.Route == len(routes)-1 || c.Other == len(routes)-1 {
			return c.Message, true
		}
	}
	return "", false
}

// SameServing reports whether s and o publish the same versions with the
// same definitions (what Routes.Effective reads of a snapshot); nil
// snapshots are the same only as each other. O(APIs), bounded by
// MaxAPIs.
func (s *Snapshot) SameServing(o *Snapshot) bool {
	if s == nil || o == nil {
		return s == o
	}
	return slices.EqualFunc(s.Serving, o.Serving, func(a, b Serving) bool {
		return a.Name == b.Name && a.Version == b.Version && bytes.Equal(a.Definition, b.Definition)
	})
}

// oneLine joins a multi-line error's lines with "; ".
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
