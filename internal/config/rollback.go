package config

import (
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
)

// Rollback configures the automatic rollback of changes that hurt the
// node (`rollback`; docs/rollback.md): every change is a numbered version
// under state_dir, watched for Window; one after which the 5xx ratio of
// levee's own making rose by MaxErrorRatio or more (over at least
// MinRequests requests), or after which the node is not ready at the end
// of the window, is reverted to the last good version and pinned.
type Rollback struct {
	// Enabled turns the watcher and the reverts on (`enabled`, default
	// true). Off, changes apply as before and nothing is recorded.
	Enabled bool
	// Window is how long a change is watched (`window`).
	Window time.Duration
	// MaxErrorRatio is the rise of the own-5xx ratio that counts as harm
	// (`max_error_ratio`).
	MaxErrorRatio float64
	// MinRequests is the fewest requests a verdict on errors needs
	// (`min_requests`).
	MinRequests int
	// Keep is the number of versions kept (`keep`).
	Keep int
	// CrashStarts and CrashWithin define a crash loop: CrashStarts starts
	// within CrashWithin that each ended before surviving Window make the
	// next start use the last good configuration (`crash_starts`, 0: off;
	// `crash_within`).
	CrashStarts int
	CrashWithin time.Duration
}

// Defaults of the rollback block, each the def of its table entry.
const (
	DefaultRollbackEnabled       = true
	DefaultRollbackWindow        = 30 * time.Second
	DefaultRollbackMaxErrorRatio = 0.1
	DefaultRollbackMinRequests   = 20
	DefaultRollbackKeep          = 50
	DefaultRollbackCrashStarts   = 3
	DefaultRollbackCrashWithin   = 5 * time.Minute
)

var rollbackBlock = engine.NewBlock(
	engine.Field{Name: "enabled", Kind: engine.KindBool, Def: DefaultRollbackEnabled, Doc: "watch every change and revert one that hurt the node",
		Bind: engine.At(func(r *Rollback) *bool { return &r.Enabled })},
	engine.Field{Name: "window", Kind: engine.KindDuration, Def: DefaultRollbackWindow, Doc: "how long a change is watched, and the window before it compared; 100ms to 1h",
		Check: engine.CheckDurationWithin(100*time.Millisecond, time.Hour), Bind: engine.At(func(r *Rollback) *time.Duration { return &r.Window })},
	engine.Field{Name: "max_error_ratio", Kind: engine.KindFraction, Def: DefaultRollbackMaxErrorRatio, Doc: "rise of the share of levee's own 502/503/504 answers (after the change minus before) that reverts it",
		Bind: engine.At(func(r *Rollback) *float64 { return &r.MaxErrorRatio })},
	engine.Field{Name: "min_requests", Kind: engine.KindInt, Lo: 1, Hi: 1_000_000, Def: DefaultRollbackMinRequests, Doc: "requests answered since the change before its error ratio is judged",
		Bind: engine.At(func(r *Rollback) *int { return &r.MinRequests })},
	engine.Field{Name: "keep", Kind: engine.KindInt, Lo: 1, Hi: 1000, Def: DefaultRollbackKeep, Doc: "versions kept under state_dir, the newest",
		Bind: engine.At(func(r *Rollback) *int { return &r.Keep })},
	engine.Field{Name: "crash_starts", Kind: engine.KindInt, Lo: 0, Hi: 16, Def: DefaultRollbackCrashStarts, Doc: "starts in a row that died within window make a crash loop, after which levee starts from the last good configuration; 0 turns it off",
		Bind: engine.At(func(r *Rollback) *int { return &r.CrashStarts })},
	engine.Field{Name: "crash_within", Kind: engine.KindDuration, Def: DefaultRollbackCrashWithin, Doc: "the crash_starts starts must all fall within this time; 1s to 24h",
		Check: engine.CheckDurationWithin(time.Second, 24*time.Hour), Bind: engine.At(func(r *Rollback) *time.Duration { return &r.CrashWithin })},
)
