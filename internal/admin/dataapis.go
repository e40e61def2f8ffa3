package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/levee-gw/levee/internal/dataapis"
)

// DataAPIStore is what the data-API lifecycle API reads and changes
// (docs/data-apis.md, "Lifecycle"). The gateway implements it over a
// *dataapis.Store: it checks every definition with package config (the
// file's rules) and rebuilds the routing table after each change to what
// serves, before returning. def is the request body as sent (a JSON
// object). Errors are classified with errors.Is / errors.As:
// *dataapis.InvalidError (422), dataapis.ErrNotFound (404),
// dataapis.ErrExists (409 data_api_exists), ErrRouteConflict (409
// route_conflict), dataapis.ErrConflict (409 conflict),
// dataapis.ErrUnavailable or a context deadline (503 store_unavailable);
// anything else is 500.
type DataAPIStore interface {
	Create(ctx context.Context, name string, def []byte) (*dataapis.API, error)
	Get(ctx context.Context, name string) (*dataapis.API, error)
	List(ctx context.Context, after string, limit int) (dataapis.Page, error)
	AddVersion(ctx context.Context, name string, def []byte) (*dataapis.API, error)
	Publish(ctx context.Context, name string, version int) (*dataapis.API, error)
	Rollback(ctx context.Context, name string, version int) (*dataapis.API, error)
	Offline(ctx context.Context, name string) (*dataapis.API, error)
	Delete(ctx context.Context, name string) error
}

// ErrRouteConflict is a publish or rollback refused because the version
// would match the same requests as a route that serves (or take its name).
var ErrRouteConflict = errors.New("route conflict")

// dataAPIRoutes registers the data-API lifecycle API on mux.
func dataAPIRoutes(mux *adminMux, store DataAPIStore) {
	mux.HandleFunc("POST /api/v1/data-apis", func(w http.ResponseWriter, r *http.Request) {
		def, ok := readDefinition(w, r)
		if !ok {
			return
		}
		var head map[string]json.RawMessage
		_ = json.Unmarshal(def, &head) // readDefinition checked it is an object
		var name string
		if raw, ok := head["name"]; !ok || json.Unmarshal(raw, &name) != nil {
			writeDataAPIError(w, &dataapis.InvalidError{Problems: []dataapis.Problem{{Field: "name", Message: "required: a string, the data API's (and its route's) name"}}})
			return
		}
		a, err := store.Create(r.Context(), name, def)
		if err != nil {
			writeDataAPIError(w, err)
			return
		}
		w.Header().Set("Location", "/api/v1/data-apis/"+a.Name)
		writeJSON(w, http.StatusCreated, a)
	})
	mux.HandleFunc("GET /api/v1/data-apis", func(w http.ResponseWriter, r *http.Request) {
		limit, ok := pageLimit(w, r, dataapis.MaxPageSize)
		if !ok {
			return
		}
		page, err := store.List(r.Context(), r.URL.Query().Get("after"), limit)
		if err != nil {
			writeDataAPIError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, page)
	})
	mux.HandleFunc("GET /api/v1/data-apis/{name}", func(w http.ResponseWriter, r *http.Request) {
		a, err := store.Get(r.Context(), r.PathValue("name"))
		answerDataAPI(w, http.StatusOK, a, err)
	})
	mux.HandleFunc("POST /api/v1/data-apis/{name}/versions", func(w http.ResponseWriter, r *http.Request) {
		def, ok := readDefinition(w, r)
		if !ok {
			return
		}
		a, err := store.AddVersion(r.Context(), r.PathValue("name"), def)
		answerDataAPI(w, http.StatusCreated, a, err)
	})
	for _, op := range []string{"publish", "rollback"} {
		mux.HandleFunc("POST /api/v1/data-apis/{name}/"+op, func(w http.ResponseWriter, r *http.Request) {
			v, ok := readVersion(w, r)
			if !ok {
				return
			}
			call := store.Publish
			if op == "rollback" {
				call = store.Rollback
			}
			a, err := call(r.Context(), r.PathValue("name"), v)
			answerDataAPI(w, http.StatusOK, a, err)
		})
	}
	mux.HandleFunc("POST /api/v1/data-apis/{name}/offline", func(w http.ResponseWriter, r *http.Request) {
		// The body is ignored, but bounded and drained.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxAppBodyBytes))
		a, err := store.Offline(r.Context(), r.PathValue("name"))
		answerDataAPI(w, http.StatusOK, a, err)
	})
	mux.HandleFunc("DELETE /api/v1/data-apis/{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := store.Delete(r.Context(), r.PathValue("name")); err != nil {
			writeDataAPIError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func answerDataAPI(w http.ResponseWriter, status int, a *dataapis.API, err error) {
	if err != nil {
		writeDataAPIError(w, err)
		return
	}
	writeJSON(w, status, a)
}

// readDefinition reads a definition body: one JSON object of at most
// maxAppBodyBytes. Its fields are package config's to check (through the
// store), with the file's strictness: unknown fields and wrong types are
// refused there (422, with the field's path). A key twice in one object
// is refused here (400 duplicate_key naming it; keys compared exactly, as
// the file's YAML does). On failure it has answered 400 or 413 and
// returns false.
func readDefinition(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAppBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body may be at most %d bytes", maxAppBodyBytes))
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return nil, false
	case !json.Valid(body):
		writeError(w, http.StatusBadRequest, "bad_request", "the body must be one JSON object (the route definition)")
		return nil, false
	case !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")):
		writeError(w, http.StatusBadRequest, "bad_request", "the body must be a JSON object (the route definition)")
		return nil, false
	case refuseDuplicateKey(w, body, false):
		return nil, false
	}
	return body, true
}

// readVersion reads the optional body {"version": N} of publish and
// rollback; an empty body (or no version) is 0, which the store reads as
// "the latest" (publish) or "the one before the published" (rollback).
func readVersion(w http.ResponseWriter, r *http.Request) (int, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAppBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body may be at most %d bytes", maxAppBodyBytes))
		return 0, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return 0, false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return 0, true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var v struct {
		Version *int `json:"version"`
	}
	if !decodeStrict(w, r, &v) {
		return 0, false
	}
	if v.Version == nil {
		return 0, true
	}
	if *v.Version < 1 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("version must be 1 or more, got %d", *v.Version), "reason": "bad_request", "field": "version"})
		return 0, false
	}
	return *v.Version, true
}

// writeDataAPIError answers a DataAPIStore error with its one status.
func writeDataAPIError(w http.ResponseWriter, err error) {
	var ie *dataapis.InvalidError
	switch {
	case errors.As(err, &ie) && len(ie.Problems) > 0:
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"error": ie.Error(), "reason": "invalid_data_api", "field": ie.Problems[0].Field, "problems": ie.Problems,
		})
	case errors.Is(err, dataapis.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, dataapis.ErrExists):
		writeError(w, http.StatusConflict, "data_api_exists", err.Error())
	case errors.Is(err, ErrRouteConflict):
		writeError(w, http.StatusConflict, "route_conflict", err.Error())
	case errors.Is(err, ErrPinned):
		writeError(w, http.StatusConflict, "pinned", err.Error())
	case errors.Is(err, dataapis.ErrConflict):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, dataapis.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the shared data-API store cannot take changes now (no node changed); retry: "+err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the data-API store did not answer in time; retry")
	default:
		writeError(w, http.StatusInternalServerError, "store_error", "the data-API store failed: "+err.Error())
	}
}
