package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/levee-gw/levee/internal/auth"
	"github.com/levee-gw/levee/internal/ratelimit"
)

// SharedLimits decides consumer limits for a cluster of levee nodes, on
// state they share (package clusterlimit, over Redis): the same checks as
// the in-process limiters (an app × route limit, then the app's; or a
// client address on an anonymous route), in one store round trip, with
// the signature of an HMAC request recorded in the same trip so that it
// is used once across the cluster. It never fails: without its store it
// decides as its failure mode says. Handler.limit stays the path without
// a cluster, unchanged.
type SharedLimits interface {
	// Decide applies checks in order to one request at now (a refusal
	// stops there; of the admitting decisions the one with the fewest
	// remaining is reported) and records it. With signature non-nil it
	// first records that MAC as used, and reports replayed (nothing else
	// recorded) when it was used before on any node.
	Decide(ctx context.Context, checks []ratelimit.Check, signature *[32]byte, now time.Time) (d ratelimit.Decision, replayed bool)
}

// limitShared is limit through h.consumers.shared. Its keys are those of
// the in-process limiters: the app's id, the app × route key (id, NUL,
// route) and, for a client address, NUL, route, NUL, address (an id is
// never empty, so the three cannot collide). limited is false when no
// policy applies (a signature may still have been recorded).
func (h *Handler) limitShared(r *http.Request, client string, rt *Route, app *App, sig *[32]byte, now time.Time) (d ratelimit.Decision, limited, replayed bool) {
	var buf [2]ratelimit.Check
	checks := buf[:0]
	if app == nil {
		if rt.AnonymousLimit != (ratelimit.Policy{}) {
			if addr, ok := clientIP(client); ok {
				key := "\x00" + rt.Name + "\x00" + addr.String()
				checks = append(checks, ratelimit.Check{Key: key, Policy: rt.AnonymousLimit})
			}
		}
	} else {
		if per, ok := app.RouteLimits[rt.Name]; ok && per != (ratelimit.Policy{}) {
			checks = append(checks, ratelimit.Check{Key: app.routeKeys[rt.Name], Policy: per})
		}
		if app.Limit != (ratelimit.Policy{}) {
			checks = append(checks, ratelimit.Check{Key: app.ID, Policy: app.Limit})
		}
	}
	if len(checks) == 0 && sig == nil {
		return d, false, false
	}
	d, replayed = h.consumers.shared.Decide(r.Context(), checks, sig, now)
	return d, len(checks) > 0, replayed
}

// signatureMAC returns the MAC of a signed request that Verify accepted
// (so its Authorization header parses).
func signatureMAC(h http.Header) *[32]byte {
	v := h["Authorization"]
	if len(v) != 1 {
		return nil
	}
	s, err := auth.ParseSignatureHeader(v[0])
	if err != nil {
		return nil
	}
	return &s.MAC
}
