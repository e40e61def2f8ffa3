package dataapis

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// route is a toy route for the rules of what serves: a name, whether it
// is a data route, and the path it serves (two routes with one path
// conflict).
type route struct {
	name, path string
	data       bool
}

var toyRoutes = Routes[route]{
	Parse: func(name string, def []byte) (route, error) {
		if string(def) == "bad" {
			return route{}, errors.New("source gone\nsecond line")
		}
		return route{name: name, path: string(def), data: true}, nil
	},
	Name: func(r route) string { return r.name },
	Data: func(r route) bool { return r.data },
	Conflicts: func(rs []route) []Conflict {
		var out []Conflict
		for i := range rs {
			for j := range i {
				if rs[i].path == rs[j].path {
					out = append(out, Conflict{Route: i, Other: j, Message: "same path " + rs[i].path})
				}
			}
		}
		return out
	},
}

func names(rs []route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.name)
	}
	return out
}

// TestEffectiveRoutes: a file data route's published version takes its
// place, one not published drops out, store-only APIs follow in name
// order, and a version that does not read or that collides is left out
// with a problem naming it.
func TestEffectiveRoutes(t *testing.T) {
	file := []route{{name: "web", path: "/"}, {name: "orders", path: "/orders", data: true}, {name: "off", path: "/off", data: true}}
	snap := &Snapshot{Serving: []Serving{
		{Name: "a-new", Version: 1, Definition: []byte("/new")},
		{Name: "broken", Version: 2, Definition: []byte("bad")},
		{Name: "clash", Version: 3, Definition: []byte("/")},
		{Name: "orders", Version: 4, Definition: []byte("/orders/v4")},
	}}
	eff, problems := toyRoutes.Effective(file, snap)
	if got := names(eff); !slices.Equal(got, []string{"web", "orders", "a-new"}) {
		t.Fatalf("effective routes %v, want web, orders (v4 in its place), a-new", got)
	}
	if eff[1].path != "/orders/v4" {
		t.Errorf("orders serves %s, want its published version", eff[1].path)
	}
	want := []string{"data API broken version 2 does not serve: source gone; second line", "data API clash does not serve: same path /"}
	if !slices.Equal(problems, want) {
		t.Errorf("problems %q, want %q", problems, want)
	}
	if eff, problems := toyRoutes.Effective(file, nil); len(eff) != 3 || problems != nil {
		t.Errorf("without a snapshot: %v %v, want the file as it is", names(eff), problems)
	}
}

// TestCheckReloadRoutes: a reload is refused when an API changed at
// runtime would no longer read or would collide, and allowed otherwise.
func TestCheckReloadRoutes(t *testing.T) {
	snap := &Snapshot{Runtime: map[string]bool{"rt": true}, Serving: []Serving{{Name: "rt", Version: 2, Definition: []byte("/rt")}}}
	if err := toyRoutes.CheckReload([]route{{name: "web", path: "/"}}, snap); err != nil {
		t.Fatalf("a reload that keeps rt serving: %v", err)
	}
	err := toyRoutes.CheckReload([]route{{name: "web", path: "/rt"}}, snap)
	if err == nil || !strings.Contains(err.Error(), "data API rt (changed at runtime) would not serve: same path /rt") {
		t.Fatalf("a reload colliding with rt: %v", err)
	}
	if why, ok := toyRoutes.PublishConflict([]route{{name: "web", path: "/x"}, {name: "rt", path: "/y"}}, "rt", route{name: "rt", path: "/x"}); !ok || why != "same path /x" {
		t.Errorf("publishing rt onto web's path: %q %v", why, ok)
	}
}
