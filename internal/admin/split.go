package admin

import (
	"errors"
	"net/http"
)

// SplitView is a route's split as GET /api/v1/routes shows it: each side's
// upstream and serving weight (the admin API's when changed, else the
// file's) and the sticky header or cookie, if any.
type SplitView struct {
	Sides        []SplitSideView `json:"sides"`
	StickyHeader string          `json:"sticky_header,omitempty"`
	StickyCookie string          `json:"sticky_cookie,omitempty"`
}

// SplitSideView is one side of a split.
type SplitSideView struct {
	Upstream string `json:"upstream"`
	Weight   int    `json:"weight"`
}

// SplitSetter, when the Operator implements it, serves PUT
// /api/v1/routes/{name}/split (scope write): the new weights of the
// route's split. Errors: ErrNoRoute (404), ErrNoSplit (409), any other is
// the body's fault (400).
type SplitSetter interface {
	SetSplit(route string, sides []SplitSideView) (*SplitView, error)
}

// splitRoutes registers PUT /api/v1/routes/{name}/split when op can set
// splits.
func splitRoutes(mux *adminMux, op Operator) {
	ss, ok := op.(SplitSetter)
	if !ok {
		return
	}
	mux.HandleFunc("PUT /api/v1/routes/{name}/split", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Split []SplitSideView `json:"split"`
		}
		if !decodeStrict(w, r, &req) {
			return
		}
		if len(req.Split) == 0 {
			writeError(w, http.StatusBadRequest, "bad_request", `the body must be {"split": [{"upstream": NAME, "weight": N}, ...]}`)
			return
		}
		name := r.PathValue("name")
		sv, err := ss.SetSplit(name, req.Split)
		switch {
		case err == nil:
			writeJSON(w, http.StatusOK, map[string]any{"route": name, "split": sv})
		case errors.Is(err, ErrNoRoute):
			writeError(w, http.StatusNotFound, "not_found", "no route "+name)
		case errors.Is(err, ErrNoSplit):
			writeError(w, http.StatusConflict, "no_split", "route "+name+" has no split (set one in the file)")
		case errors.Is(err, ErrPinned):
			writeError(w, http.StatusConflict, "pinned", err.Error())
		default:
			writeError(w, http.StatusBadRequest, "invalid_split", err.Error())
		}
	})
}

// The errors a SplitSetter returns for an unknown route and a route
// without a split.
var (
	ErrNoRoute = errors.New("no such route")
	ErrNoSplit = errors.New("the route has no split")
)
