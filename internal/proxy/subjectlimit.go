package proxy

// Per-subject limits: on a route with auth jwt whose issuer has
// per_subject (identity.jwt_issuers.<name>.per_subject), the token's sub
// is an end user inside its app with a limit of its own, checked before
// the app's limits (a user over its limit does not spend the app's
// budget). Keys are "\x01" issuer NUL app NUL subject, apart from every
// app and anonymous key (shared.go): in-process in
// consumerState.subjectLimits, in a cluster in the shared store like the
// app limits. A subject is chosen by whoever the issuer signs tokens for,
// so the key is bounded: a subject over maxSubjectKeyBytes is replaced by
// its SHA-256 (hex), and the in-process table holds at most
// subjectLimitKeys keys, idle ones evicted first (evicting a busy one
// forgives its count: levee_rate_limit_evictions_total{table="subject"}).
// A token without sub has no per-subject limit. A refusal is 429
// rate_limited or quota_exhausted with detail per_subject and
// Retry-After.

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/levee-gw/levee/internal/ratelimit"
)

const (
	// subjectLimitKeys bounds the in-process per-subject state.
	subjectLimitKeys = 1 << 18
	// maxSubjectKeyBytes: a longer subject is keyed by its SHA-256.
	maxSubjectKeyBytes = 128
	// DetailPerSubject is the detail of a per-subject refusal.
	DetailPerSubject = "per_subject"
)

// subjectKey is the limiter key of subject inside app of issuer.
func subjectKey(issuer, app, subject string) string {
	if len(subject) > maxSubjectKeyBytes {
		sum := sha256.Sum256([]byte(subject))
		subject = "#" + hex.EncodeToString(sum[:])
	}
	return "\x01" + issuer + "\x00" + app + "\x00" + subject
}

// limitSubject applies x's per-subject limit at now; false after writing
// the refusal.
func (h *Handler) limitSubject(w http.ResponseWriter, r *http.Request, x *exchange, now time.Time) bool {
	var d ratelimit.Decision
	if h.consumers.shared != nil {
		d, _ = h.consumers.shared.Decide(r.Context(), []ratelimit.Check{{Key: x.subject, Policy: x.subjectPolicy}}, nil, now)
	} else {
		d = h.consumers.subjectLimits.Allow(x.subject, x.subjectPolicy, now)
	}
	if d.Allowed {
		return true
	}
	d.SetHeaders(w.Header())
	reason := ReasonRateLimited
	if d.Quota {
		reason = ReasonQuotaExhausted
	}
	x.refuseDetail(w, reason, DetailPerSubject)
	return false
}
