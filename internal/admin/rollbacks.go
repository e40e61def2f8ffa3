package admin

import (
	"errors"
	"net/http"
	"strconv"
)

// ErrPinned is a change refused because its content is pinned as bad by
// the automatic rollback (docs/rollback.md): a reload of the same bad
// file, a publish of a pinned data-API version. Answered 409 "pinned".
var ErrPinned = errors.New("pinned as bad by the automatic rollback")

// ErrNotPinned is RollbackStore.Unpin's error for a version without a pin
// (404).
var ErrNotPinned = errors.New("no pin of that version")

// RollbackStore is the automatic rollback as the admin API sees it
// (GET /api/v1/rollbacks, unpinning).
type RollbackStore interface {
	// Rollbacks returns the versions, pins and starts, and whether levee
	// serves its last good configuration instead of the file (JSON).
	Rollbacks() any
	// Unpin removes the pin of version n (ErrNotPinned: none), so that
	// its content may be applied again.
	Unpin(n int) (any, error)
}

func rollbackRoutes(mux *adminMux, s RollbackStore) {
	mux.HandleFunc("GET /api/v1/rollbacks", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Rollbacks())
	})
	unpin := func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("version"))
		if err != nil || n <= 0 {
			writeError(w, http.StatusBadRequest, "invalid_version", "a version is a positive integer, not "+strconv.Quote(r.PathValue("version")))
			return
		}
		pin, err := s.Unpin(n)
		switch {
		case errors.Is(err, ErrNotPinned):
			writeError(w, http.StatusNotFound, "not_found", "version "+strconv.Itoa(n)+" is not pinned")
		case err != nil:
			writeError(w, http.StatusInternalServerError, "store_error", "the rollback state failed: "+err.Error())
		default:
			writeJSON(w, http.StatusOK, map[string]any{"unpinned": pin})
		}
	}
	mux.HandleFunc("DELETE /api/v1/rollbacks/pins/{version}", unpin)
	mux.HandleFunc("POST /api/v1/rollbacks/pins/{version}/unpin", unpin)
}
