package proxy

// Dropped returns the names of the routes and upstreams old serves and
// next does not (each once), whose series the caller forgets when next
// replaces old: without that, every name ever served would keep its
// series until the process ends (unbounded for data APIs created and
// deleted at runtime). old nil: none.
func Dropped(old, next *Table) (routes, upstreams []string) {
	if old == nil {
		return nil, nil
	}
	keep := make(map[string]bool, len(next.Routes()))
	for _, rt := range next.Routes() {
		keep[rt.Name] = true
	}
	for _, rt := range old.Routes() {
		if !keep[rt.Name] {
			keep[rt.Name] = true // a name twice in old: once
			routes = append(routes, rt.Name)
		}
	}
	keep = make(map[string]bool, len(next.Upstreams()))
	for _, u := range next.Upstreams() {
		keep[u.Name] = true
	}
	for _, u := range old.Upstreams() {
		if !keep[u.Name] {
			keep[u.Name] = true
			upstreams = append(upstreams, u.Name)
		}
	}
	return routes, upstreams
}
