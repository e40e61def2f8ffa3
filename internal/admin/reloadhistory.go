package admin

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// reloadHistoryLen bounds the reload history GET /api/v1/reloads shows:
// the oldest entry is overwritten by the next load.
const reloadHistoryLen = 32

// maxReloadProblems and maxReloadProblemBytes bound what a refused reload
// keeps of its error: a file with thousands of mistakes must not hold
// megabytes in the history (the full error is in the log and in the
// answer to POST /api/v1/reload).
const (
	maxReloadProblems     = 20
	maxReloadProblemBytes = 512
)

// ReloadHistory is a ring of the last configuration loads, what GET
// /api/v1/reloads shows (Options.Reloads: its List). The zero value is
// ready; safe for concurrent use.
type ReloadHistory struct {
	mu   sync.Mutex
	ring [reloadHistoryLen]ReloadView
	next int // where the next entry goes
	n    int // entries held, at most reloadHistoryLen
}

// Add records a load at now: result "start", "success" or "error" with
// err's lines as its problems (bounded).
func (h *ReloadHistory) Add(now time.Time, result string, err error) {
	v := ReloadView{Time: now.UTC(), Result: result}
	if err != nil {
		lines := strings.Split(err.Error(), "\n")
		if len(lines) > maxReloadProblems {
			more := len(lines) - maxReloadProblems
			lines = append(lines[:maxReloadProblems:maxReloadProblems], "... and "+strconv.Itoa(more)+" more (see the log)")
		}
		for i, l := range lines {
			if len(l) > maxReloadProblemBytes {
				lines[i] = strings.ToValidUTF8(l[:maxReloadProblemBytes], "") + "..."
			}
		}
		v.Problems = lines
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring[h.next] = v
	h.next = (h.next + 1) % reloadHistoryLen
	h.n = min(h.n+1, reloadHistoryLen)
}

// List returns the loads held, newest first.
func (h *ReloadHistory) List() []ReloadView {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]ReloadView, 0, h.n)
	for i := 1; i <= h.n; i++ {
		out = append(out, h.ring[(h.next-i+reloadHistoryLen)%reloadHistoryLen])
	}
	return out
}
