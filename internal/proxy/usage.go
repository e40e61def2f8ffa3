package proxy

import (
	"errors"
	"io"
	"time"

	"github.com/levee-gw/levee/internal/ratelimit"
)

// This file charges an answer to its app's row and byte quotas
// (limits.quota rows and bytes) as it streams. A request of an app with no
// such quota has no meter: nothing here runs on the fast path. A data
// route charges its rows and their bytes itself through upstream.Usage
// (dataapi, dataformat.Limits.Meter); any other answer is charged its body
// bytes as the proxy reads it (meteredBody). An answer that crosses the
// quota ends there (a data answer with its format's truncation marker, a
// proxied one with its connection or stream aborted) and the quota is used
// up: the app's next request is refused 429 quota_exhausted until the
// window ends.

// usageMeter is one request's charge to at most two quota cells (the
// app × route policy's and the app's).
type usageMeter struct {
	cells  [2]*ratelimit.QuotaCell
	quotas [2]ratelimit.Quota
	n      int
	m      *Metrics
	owned  bool // the forwarder charges its answer itself
	cut    bool // a charge did not fit
}

// newUsageMeter returns the meter of app's request on rt, nil when
// neither of the policies counts rows or bytes.
func (h *Handler) newUsageMeter(rt *Route, app *App, now time.Time) *usageMeter {
	if app == nil {
		return nil
	}
	per, hasRoute := app.RouteLimits[rt.Name]
	routeUsage := hasRoute && per.Quota.Usage()
	if !routeUsage && !app.Limit.Quota.Usage() {
		return nil
	}
	u := &usageMeter{m: h.metrics}
	if routeUsage {
		u.cells[u.n], u.quotas[u.n] = h.consumers.appLimits.QuotaCell(app.routeKeys[rt.Name], now), per.Quota
		u.n++
	}
	if app.Limit.Quota.Usage() {
		u.cells[u.n], u.quotas[u.n] = h.consumers.appLimits.QuotaCell(app.ID, now), app.Limit.Quota
		u.n++
	}
	return u
}

// Take implements upstream.Usage.
func (u *usageMeter) Take(rows, bytes int64) bool {
	if u.cut {
		return false
	}
	ok, now := true, time.Now()
	for i := range u.n {
		if !u.cells[i].Take(u.quotas[i], rows, bytes, now) {
			ok = false
		}
	}
	if !ok {
		u.cut = true
		if u.m != nil {
			u.m.quotaCut.Inc()
		}
		return false
	}
	if u.m != nil {
		if rows > 0 {
			u.m.quotaRows.Add(float64(rows))
		}
		if bytes > 0 {
			u.m.quotaBytes.Add(float64(bytes))
		}
	}
	return true
}

// Own implements upstream.Usage.
func (u *usageMeter) Own() { u.owned = true }

// room is how many more bytes fit every cell's byte count (-1: none
// counts bytes).
func (u *usageMeter) room(now time.Time) int64 {
	left := int64(-1)
	for i := range u.n {
		if r := u.cells[i].Room(u.quotas[i], now); r >= 0 && (left < 0 || r < left) {
			left = r
		}
	}
	return left
}

// exhausted reports whether a cell's rows or bytes of the window are used
// up, with the time until its window ends: what a shared limiter's
// decision does not see (shared.go).
func (u *usageMeter) exhausted(now time.Time) (bool, time.Duration) {
	for i := range u.n {
		if d := u.cells[i].Peek(u.quotas[i], now); !d.Allowed {
			return true, d.RetryAfter
		}
	}
	return false, 0
}

// errQuotaCut ends a proxied answer's body at its byte quota.
var errQuotaCut = errors.New("proxy: the answer crossed the app's byte quota")

// meteredBody charges each read of a proxied answer's body to the meter;
// the read that crosses the quota passes on only what fits (charged too,
// which uses the byte count up), then errQuotaCut.
type meteredBody struct {
	io.ReadCloser
	u *usageMeter
}

func (b *meteredBody) Read(p []byte) (int, error) {
	if b.u.cut {
		return 0, errQuotaCut
	}
	n, err := b.ReadCloser.Read(p)
	if n == 0 {
		return n, err
	}
	if left := b.u.room(time.Now()); left >= 0 && int64(n) > left {
		// The bytes that fit go to the client, then the count is used up
		// (a charge of one more byte does not fit and marks it so).
		if left > 0 && !b.u.Take(0, left) {
			return 0, errQuotaCut
		}
		b.u.Take(0, 1)
		return int(left), errQuotaCut
	}
	if !b.u.Take(0, int64(n)) { // another answer of the app took the room meanwhile
		return 0, errQuotaCut
	}
	return n, err
}
