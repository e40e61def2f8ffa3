package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/levee-gw/levee/internal/apps"
)

// AppStore is what the apps API reads and changes. *apps.Store implements
// it; the gateway wraps it to check grants against the serving routes.
// Errors are classified with errors.Is / errors.As: apps.ErrNotFound
// (404), apps.ErrExists and apps.ErrConflict (409), *apps.ValidationError
// (422), apps.ErrUnavailable or a context deadline (503
// store_unavailable); anything else is 500.
type AppStore interface {
	Create(ctx context.Context, spec apps.Spec) (*apps.App, error)
	Get(ctx context.Context, id string) (*apps.App, error)
	List(ctx context.Context, after string, limit int) (apps.Page, error)
	Patch(ctx context.Context, id string, p apps.Patch) (*apps.App, error)
	Delete(ctx context.Context, id string) error
	CreateKey(ctx context.Context, id string) (apps.NewKey, error)
	RevokeKey(ctx context.Context, id, keyID string) (apps.Key, error)
}

// maxAppBodyBytes bounds an apps API request body: an app with the most
// grants and route limits fits in far less.
const maxAppBodyBytes = 256 << 10

// appRoutes registers the apps API on mux.
func appRoutes(mux *adminMux, store AppStore) {
	mux.HandleFunc("POST /api/v1/apps", func(w http.ResponseWriter, r *http.Request) {
		var spec apps.Spec
		if !decodeStrict(w, r, &spec) {
			return
		}
		a, err := store.Create(r.Context(), spec)
		if err != nil {
			writeStoreError(w, err)
			return
		}
		w.Header().Set("Location", "/api/v1/apps/"+a.ID)
		writeJSON(w, http.StatusCreated, a)
	})
	mux.HandleFunc("GET /api/v1/apps", func(w http.ResponseWriter, r *http.Request) {
		limit, ok := pageLimit(w, r, apps.MaxPageSize)
		if !ok {
			return
		}
		page, err := store.List(r.Context(), r.URL.Query().Get("after"), limit)
		if err != nil {
			writeStoreError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, page)
	})
	mux.HandleFunc("GET /api/v1/apps/{id}", func(w http.ResponseWriter, r *http.Request) {
		a, err := store.Get(r.Context(), r.PathValue("id"))
		if err != nil {
			writeStoreError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, a)
	})
	mux.HandleFunc("PATCH /api/v1/apps/{id}", func(w http.ResponseWriter, r *http.Request) {
		var p apps.Patch
		if !decodeStrict(w, r, &p) {
			return
		}
		if p == (apps.Patch{}) {
			writeError(w, http.StatusBadRequest, "bad_request", "the patch sets no field; send one or more of name, status, grants, limits, route_limits")
			return
		}
		a, err := store.Patch(r.Context(), r.PathValue("id"), p)
		if err != nil {
			writeStoreError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, a)
	})
	mux.HandleFunc("DELETE /api/v1/apps/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := store.Delete(r.Context(), r.PathValue("id")); err != nil {
			writeStoreError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /api/v1/apps/{id}/keys", func(w http.ResponseWriter, r *http.Request) {
		// The body is ignored, but bounded and drained.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxAppBodyBytes))
		k, err := store.CreateKey(r.Context(), r.PathValue("id"))
		if err != nil {
			writeStoreError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, k)
	})
	mux.HandleFunc("DELETE /api/v1/apps/{id}/keys/{keyid}", func(w http.ResponseWriter, r *http.Request) {
		k, err := store.RevokeKey(r.Context(), r.PathValue("id"), r.PathValue("keyid"))
		if err != nil {
			writeStoreError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, k)
	})
	passwordRoutes(mux, store)
	certificateRoutes(mux, store)
}

// passwordRoutes registers the basic-auth password routes: a password is
// created (generated, or chosen in {"password": "..."}), revoked, and
// listed with its app (GET /api/v1/apps/{id}: "passwords", never a digest).
// A store without passwords answers 501 (both levee's stores keep them).
func passwordRoutes(mux *adminMux, store AppStore) {
	pb, _ := store.(apps.PasswordBackend)
	mux.HandleFunc("POST /api/v1/apps/{id}/passwords", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Password string `json:"password"`
		}
		if r.ContentLength != 0 && !decodeStrict(w, r, &body) {
			return
		}
		if pb == nil {
			writeStoreError(w, apps.ErrUnsupported)
			return
		}
		p, err := pb.CreatePassword(r.Context(), r.PathValue("id"), body.Password)
		if err != nil {
			writeStoreError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, p)
	})
	mux.HandleFunc("DELETE /api/v1/apps/{id}/passwords/{pwid}", func(w http.ResponseWriter, r *http.Request) {
		if pb == nil {
			writeStoreError(w, apps.ErrUnsupported)
			return
		}
		p, err := pb.RevokePassword(r.Context(), r.PathValue("id"), r.PathValue("pwid"))
		if err != nil {
			writeStoreError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
	})
}

// pageLimit reads a list's limit query parameter (0 when absent: the
// store's default), 1 to max; otherwise it has answered 400.
func pageLimit(w http.ResponseWriter, r *http.Request, max int) (int, bool) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 0, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("limit must be a number from 1 to %d", max))
		return 0, false
	}
	return n, true
}

// decodeStrict decodes exactly one JSON value of at most maxAppBodyBytes
// into v, refusing unknown fields, trailing data and a key twice in one
// object (strictjson.go; keys compared as encoding/json matches them). On failure it has
// answered 400 or 413 and returns false.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := readBody(w, r, maxAppBodyBytes)
	if !ok || refuseDuplicateKey(w, body, true) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON value")
	}
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("trailing data after the JSON value")
		}
	}
	if err == nil {
		return true
	}
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "bad_request", "the body must be a JSON object")
	case errors.As(err, &typeErr) && typeErr.Field != "":
		writeJSON(w, http.StatusBadRequest, map[string]string{
			"error":  fmt.Sprintf("%s must be %s, got JSON %s", typeErr.Field, typeErr.Type, typeErr.Value),
			"reason": "bad_request", "field": typeErr.Field,
		})
	default:
		writeError(w, http.StatusBadRequest, "bad_request", "invalid JSON body: "+strings.TrimPrefix(err.Error(), "json: "))
	}
	return false
}

// writeStoreError answers an AppStore error with its one status.
func writeStoreError(w http.ResponseWriter, err error) {
	var ve *apps.ValidationError
	switch {
	case errors.As(err, &ve):
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": ve.Error(), "reason": "invalid_app", "field": ve.Field})
	case errors.Is(err, apps.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, apps.ErrExists):
		writeError(w, http.StatusConflict, "app_exists", err.Error())
	case errors.Is(err, apps.ErrConflict):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, apps.ErrUnsupported):
		writeError(w, http.StatusNotImplemented, "not_supported", err.Error())
	case errors.Is(err, apps.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the shared app store cannot take changes now (no node changed); retry: "+err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the app store did not answer in time; retry")
	default:
		writeError(w, http.StatusInternalServerError, "store_error", "the app store failed: "+err.Error())
	}
}
