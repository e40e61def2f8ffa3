package admin

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/levee-gw/levee/internal/profiles"
)

// ProfileStore is what /api/v1/profiles reads: the captures levee took by
// itself (package profiles). The gateway implements it over state_dir.
type ProfileStore interface {
	// List returns the captures, newest first.
	List() ([]profiles.Capture, error)
	// Open opens one capture file by name; os.ErrNotExist for a name that
	// is not one.
	Open(name string) (*os.File, error)
}

// profileRoutes registers GET /api/v1/profiles (the list) and GET
// /api/v1/profiles/{name} (one file, to download and hand to go tool
// pprof): reads, scope read is enough.
func profileRoutes(mux *adminMux, store ProfileStore) {
	mux.HandleFunc("GET /api/v1/profiles", func(w http.ResponseWriter, r *http.Request) {
		caps, err := store.List()
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", "listing the profiles: "+err.Error())
			return
		}
		if caps == nil {
			caps = []profiles.Capture{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"profiles": caps})
	})
	mux.HandleFunc("GET /api/v1/profiles/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		f, err := store.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			writeError(w, http.StatusNotFound, "not_found", "no profile file named "+strconv.Quote(name))
			return
		}
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", "opening the profile: "+err.Error())
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", "opening the profile: "+err.Error())
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
		h.Set("Content-Length", strconv.FormatInt(st.Size(), 10))
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, io.LimitReader(f, st.Size()))
	})
}
