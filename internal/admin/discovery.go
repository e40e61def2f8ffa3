package admin

import (
	"errors"
	"net/http"
	"time"
)

// The discovery API's outcomes: the gateway returns these typed results and
// errors, and this file alone turns them into HTTP statuses and bodies.

// Errors of Gateway.PushEndpoints and Gateway.ConfirmUpstream.
var (
	// ErrNotPushUpstream: the upstream does not exist or has no push feed
	// (409 not_push_upstream).
	ErrNotPushUpstream = errors.New("upstream does not take pushed endpoints")
	// ErrNoFeed: the upstream does not exist or has no discovery feed
	// (404 not_found).
	ErrNoFeed = errors.New("upstream has no discovery feed")
	// ErrNothingHeld: the feed's delta guard holds nothing to confirm
	// (409 nothing_held).
	ErrNothingHeld = errors.New("nothing is held")
	// ErrStoreUnavailable: in cluster mode, etcd cannot take the push or
	// the confirmation now, so no node changed (503 store_unavailable,
	// Retry-After).
	ErrStoreUnavailable = errors.New("the shared store is unavailable")
	// ErrPushTooLarge: in cluster mode, a pushed list over what etcd
	// takes in one value (413 body_too_large).
	ErrPushTooLarge = errors.New("the pushed list is too large to share")
)

// PushRefusedError is a pushed list refused whole (422): malformed, too
// large, or every instance rejected. Nothing changed.
type PushRefusedError struct {
	// Reason is the discovery firewall's stable code ("refused" when it
	// gave none).
	Reason   string
	Err      error
	Rejected []QuarantineView
}

func (e *PushRefusedError) Error() string { return e.Err.Error() }
func (e *PushRefusedError) Unwrap() error { return e.Err }

// PushResult is an accepted push: applied at once, or held by the delta
// guard.
type PushResult struct {
	Held         bool
	DropFraction float64
	// Instances counts the instances accepted from the list.
	Instances int
	Rejected  []QuarantineView
}

// ConfirmResult is a held update applied on an operator's word.
type ConfirmResult struct {
	DropFraction float64
	HeldFor      time.Duration
}

// writeStoreUnavailable answers a push or confirmation etcd did not take:
// 503 store_unavailable, Retry-After: 1, as the apps API does.
func writeStoreUnavailable(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the shared store cannot take changes now (no node changed); retry: "+err.Error())
}

// writePush answers PUT /api/v1/upstreams/{name}/endpoints: 200 applied,
// 202 held, 409 not a push upstream, 413 too large to share, 422 refused,
// 503 shared store unavailable, 500 anything else.
func writePush(w http.ResponseWriter, name string, res PushResult, err error) {
	var refused *PushRefusedError
	switch {
	case err == nil:
		status, result := http.StatusOK, "applied"
		if res.Held {
			status, result = http.StatusAccepted, "held"
		}
		writeJSON(w, status, map[string]any{"result": result, "drop_fraction": res.DropFraction, "instances": res.Instances, "rejected": nonNil(res.Rejected)})
	case errors.As(err, &refused):
		reason := refused.Reason
		if reason == "" {
			reason = "refused"
		}
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"error": refused.Error(), "reason": reason, "rejected": nonNil(refused.Rejected),
			"result": "refused",
		})
	case errors.Is(err, ErrPinned):
		writeError(w, http.StatusConflict, "pinned", err.Error())
	case errors.Is(err, ErrNotPushUpstream):
		writeError(w, http.StatusConflict, "not_push_upstream", "upstream "+name+" does not take pushed endpoints (set discovery: {push: true})")
	case errors.Is(err, ErrPushTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", err.Error())
	case errors.Is(err, ErrStoreUnavailable):
		writeStoreUnavailable(w, err)
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// writeConfirm answers POST /api/v1/upstreams/{name}/confirm: 200
// applied, 404 no feed, 409 nothing held, 503 shared store unavailable,
// 500 anything else.
func writeConfirm(w http.ResponseWriter, name string, res ConfirmResult, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]any{"result": "applied", "drop_fraction": res.DropFraction, "held_for": res.HeldFor.String()})
	case errors.Is(err, ErrNoFeed):
		writeError(w, http.StatusNotFound, "not_found", "upstream "+name+" has no discovery feed")
	case errors.Is(err, ErrPinned):
		writeError(w, http.StatusConflict, "pinned", err.Error())
	case errors.Is(err, ErrNothingHeld):
		writeError(w, http.StatusConflict, "nothing_held", "nothing is held for upstream "+name)
	case errors.Is(err, ErrStoreUnavailable):
		writeStoreUnavailable(w, err)
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// nonNil keeps an empty list a JSON [] rather than null.
func nonNil(v []QuarantineView) []QuarantineView {
	if v == nil {
		return []QuarantineView{}
	}
	return v
}
