package proxy

import (
	"context"
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

	// In a cluster (shared non-nil) the counts are Redis's: each cell's
	// rows and bytes are granted in chunks (usageChunkRows,
	// usageChunkBytes) kept in allow, and what an answer ending normally
	// did not use is given back (release). Redis not answering turns the
	// meter to the node's own cells for the rest of the answer.
	shared     SharedUsage
	keys       [2]string
	allowRows  [2]int64
	allowBytes [2]int64
}

// SharedUsage keeps row and byte counts for a cluster
// (clusterlimit.Limiter.Charge): grants at most what fits of rows and
// bytes asked for key's window ending at end (Unix ns), a negative ask
// gives back, an ask of 0 reads; ok false when the store did not answer.
type SharedUsage interface {
	Charge(ctx context.Context, key string, end, rows, bytes, rowLimit, byteLimit int64) (gotRows, gotBytes, usedRows, usedBytes int64, ok bool)
}

// The chunks a node asks Redis for at once: one round trip per 64 rows or
// 64 KiB of an answer, at most that much held per answer and given back
// when it ends.
const (
	usageChunkRows  = 64
	usageChunkBytes = 64 << 10
)

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
		u.keys[u.n] = app.routeKeys[rt.Name]
		u.cells[u.n], u.quotas[u.n] = h.consumers.appLimits.QuotaCell(u.keys[u.n], now), per.Quota
		u.n++
	}
	if app.Limit.Quota.Usage() {
		u.keys[u.n] = app.ID
		u.cells[u.n], u.quotas[u.n] = h.consumers.appLimits.QuotaCell(app.ID, now), app.Limit.Quota
		u.n++
	}
	if su, ok := h.consumers.shared.(SharedUsage); ok && h.consumers.shared != nil {
		u.shared = su
	}
	return u
}

// Take implements upstream.Usage.
func (u *usageMeter) Take(rows, bytes int64) bool {
	if u.cut {
		return false
	}
	var ok bool
	now := time.Now()
	if u.shared != nil {
		ok = u.takeShared(rows, bytes, now)
	} else {
		ok = u.takeLocal(rows, bytes, now)
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

// takeLocal is Take on this node's cells.
func (u *usageMeter) takeLocal(rows, bytes int64, now time.Time) bool {
	ok := true
	for i := range u.n {
		if !u.cells[i].Take(u.quotas[i], rows, bytes, now) {
			ok = false
		}
	}
	return ok
}

// takeShared is Take through Redis: from each cell's granted chunk, asking
// for another when it runs short.
func (u *usageMeter) takeShared(rows, bytes int64, now time.Time) bool {
	fits := true
	for i := range u.n {
		q := u.quotas[i]
		needR, needB := rows, bytes
		if q.Rows() == 0 {
			needR = 0
		}
		if q.Bytes() == 0 {
			needB = 0
		}
		if needR <= u.allowRows[i] && needB <= u.allowBytes[i] {
			continue
		}
		var askR, askB int64
		if needR > u.allowRows[i] {
			askR = max(needR-u.allowRows[i], min(usageChunkRows, q.Rows()))
		}
		if needB > u.allowBytes[i] {
			askB = max(needB-u.allowBytes[i], min(usageChunkBytes, q.Bytes()))
		}
		gotR, gotB, _, _, ok := u.shared.Charge(context.Background(), u.keys[i], q.WindowEnd(now), askR, askB, q.Rows(), q.Bytes())
		if !ok { // Redis away: this node's own counts from here on
			u.shared = nil
			return u.takeLocal(rows, bytes, now)
		}
		u.allowRows[i] += gotR
		u.allowBytes[i] += gotB
		if needR > u.allowRows[i] || needB > u.allowBytes[i] {
			fits = false // Redis's count is used up: the grant fell short
		}
	}
	if !fits {
		return false
	}
	for i := range u.n {
		if u.quotas[i].Rows() != 0 {
			u.allowRows[i] -= rows
		}
		if u.quotas[i].Bytes() != 0 {
			u.allowBytes[i] -= bytes
		}
	}
	return true
}

// release gives back to Redis what an answer that ended within its quota
// was granted and did not use (an answer cut at its quota keeps the count
// used up).
func (u *usageMeter) release() {
	if u.shared == nil || u.cut {
		return
	}
	now := time.Now()
	for i := range u.n {
		if u.allowRows[i] > 0 || u.allowBytes[i] > 0 {
			q := u.quotas[i]
			u.shared.Charge(context.Background(), u.keys[i], q.WindowEnd(now), -u.allowRows[i], -u.allowBytes[i], q.Rows(), q.Bytes())
			u.allowRows[i], u.allowBytes[i] = 0, 0
		}
	}
}

// exhaustedShared is exhausted through Redis (ok false: it did not
// answer).
func (u *usageMeter) exhaustedShared(now time.Time) (out bool, wait time.Duration, ok bool) {
	for i := range u.n {
		q := u.quotas[i]
		end := q.WindowEnd(now)
		_, _, usedR, usedB, answered := u.shared.Charge(context.Background(), u.keys[i], end, 0, 0, q.Rows(), q.Bytes())
		if !answered {
			return false, 0, false
		}
		if (q.Rows() != 0 && usedR >= q.Rows()) || (q.Bytes() != 0 && usedB >= q.Bytes()) {
			return true, time.Duration(end - now.UnixNano()), true
		}
	}
	return false, 0, true
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
