package discovery

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"sync"
	"time"
)

// Feed is one upstream's dynamic endpoint set: fed by a registry Source
// (or by admin pushes), filtered by the firewall and the delta guard,
// persisted as a snapshot under a state directory, and read whenever the
// routing table is built.
//
// Where its set comes from, in order: the last good registry update; at
// start, the snapshot on disk; failing that, the static endpoints it was
// given.
//
// Locking: one mutex covers the served set and the delta guard, so that
// every guard decision is made against the set it will replace, and a
// held set released by an operator cannot overwrite an update that
// arrived after it was held (the guard and the set change together). The
// mutex is never held across I/O: snapshots are written after it is
// released, under persistMu, which only another snapshot write waits on;
// logs are written after it is released; Applied is called without it.
type Feed struct {
	o       FeedOptions
	dedupe  *Deduper
	metrics *Metrics
	logger  *slog.Logger

	mu struct {
		sync.Mutex
		guard    guardCore
		current  []Instance
		origin   string // "registry", "push", "snapshot", "config" or "" (none yet)
		rejected []Rejection
		lastErr  string
		updated  time.Time
		version  uint64 // counts applied sets, so that snapshot writes keep only the latest
	}
	// persistMu serialises snapshot writes; persisted is the version on
	// disk. Taken without mu, and mu only briefly under it.
	persistMu sync.Mutex
	persisted uint64

	// shared orders the pushes a cluster shares (shared.go).
	shared sharedPush

	// confirmHook, when set by a test, runs in Confirm after the held set
	// is taken from the guard and before it is applied.
	confirmHook func()

	cancel context.CancelFunc
	done   chan struct{}
}

// FeedOptions configure a Feed.
type FeedOptions struct {
	// Upstream names the upstream (labels, logs, the snapshot's file).
	Upstream string
	// Static are the configured endpoints, served when there is neither a
	// registry update nor a snapshot yet.
	Static []Instance
	Limits Limits
	Guard  GuardOptions
	// Source is the registry; nil for a feed that takes admin pushes.
	Source Source
	// SourceName names the source for the admin API and notes:
	// "file:PATH", "etcd:PREFIX" or "push".
	SourceName string
	// StateDir holds the snapshot.
	StateDir string
	// Metrics are shared by every feed. Required.
	Metrics *Metrics
	Logger  *slog.Logger
	// Applied is called (without the feed's mutex held) after a new set
	// was applied and persisted, to swap the upstream's endpoints and picker.
	Applied func()
	// Admit, when set, is asked (with the feed's mutex held: it must not
	// call back into the feed) before a set is applied, whoever brought
	// it (registry, push, the guard's release, an operator's confirm): an
	// error refuses the set, which is not applied (the automatic
	// rollback's pins, docs/rollback.md). by is "registry", "push" or
	// "confirm".
	Admit func(list []Instance, by string) error
	// Changed, when set, is called (without the feed's mutex, after
	// Applied) with the set served before and the one just applied, when
	// a registry update, a push or a confirm applied one (not a Revert).
	Changed func(prev, next []Instance, by string)
}

// NewFeed builds (without starting) a feed, serving its snapshot (or the
// static endpoints) until the source delivers.
func NewFeed(o FeedOptions) (*Feed, error) {
	if o.Metrics == nil {
		return nil, errors.New("discovery feed: Metrics are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Applied == nil {
		o.Applied = func() {}
	}
	guard, err := newGuardCore(o.Guard)
	if err != nil {
		return nil, err
	}
	o.Metrics.declare(o.Upstream)
	f := &Feed{o: o, dedupe: NewDeduper(DefaultDedupeCapacity), metrics: o.Metrics, logger: o.Logger}
	f.mu.guard = guard
	// The last good set survives restarts: start from it when there is one.
	if snap, at, err := ReadSnapshot(o.StateDir, o.Upstream, o.Limits); err == nil {
		f.mu.current, f.mu.origin, f.mu.updated = snap, "snapshot", at
	} else if !errors.Is(err, fs.ErrNotExist) {
		f.logger.Warn("discovery snapshot unreadable; not used", "error", err)
	}
	if f.mu.origin == "" && len(o.Static) > 0 {
		f.mu.current, f.mu.origin = o.Static, "config"
	}
	return f, nil
}

// Upstream names the feed's upstream.
func (f *Feed) Upstream() string { return f.o.Upstream }

// SourceName names where the feed's instances come from.
func (f *Feed) SourceName() string { return f.o.SourceName }

// TakesPushes reports whether the feed has no registry source and so takes
// endpoint lists pushed to the admin API.
func (f *Feed) TakesPushes() bool { return f.o.Source == nil }

// Connected reports whether the feed's registry was reachable at the last
// attempt (always true for sources that cannot tell).
func (f *Feed) Connected() bool {
	if c, ok := f.o.Source.(interface{ Connected() bool }); ok {
		return c.Connected()
	}
	return true
}

// Start runs the feed's source (and the guard's confirm_after timer) until
// Stop.
func (f *Feed) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	var wg sync.WaitGroup
	if f.o.Source != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.o.Source.Run(ctx, f.handle); err != nil {
				f.logger.Error("discovery source stopped", "error", err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.releaseHeldLoop(ctx)
	}()
	go func() {
		wg.Wait()
		close(f.done)
	}()
}

// Stop ends the feed's goroutines and waits for them (a no-op for a feed
// never started).
func (f *Feed) Stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	<-f.done
}

// releaseHeldLoop re-offers a held update once a second, so that one the
// registry keeps sending unchanged (or sends once and never again) is
// applied when it has persisted for confirm_after.
func (f *Feed) releaseHeldLoop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			f.reofferHeld(now)
		}
	}
}

// reofferHeld offers the held update again at now, in the same critical
// section that reads it, so that an update arriving in between is never
// replaced by the older held one.
func (f *Feed) reofferHeld(now time.Time) {
	f.mu.Lock()
	h, ok := f.mu.guard.heldNow()
	if !ok {
		f.mu.Unlock()
		return
	}
	d := f.mu.guard.offer(f.mu.current, h.Instances, now)
	if d.Action == Hold {
		f.mu.Unlock()
		return
	}
	if err := f.admit(d.Instances, "registry"); err != nil {
		f.mu.Unlock()
		f.refusedByAdmit(err)
		return
	}
	// As before the move: a re-offered update carries no rejections of
	// its own, so the quarantine list clears.
	prev := f.mu.current
	f.applyLocked(d.Instances, nil, "registry", now)
	f.mu.Unlock()
	f.applied()
	f.changed(prev, d.Instances, "registry")
}

// admit asks Admit about list. Called with f.mu held.
func (f *Feed) admit(list []Instance, by string) error {
	if f.o.Admit == nil {
		return nil
	}
	return f.o.Admit(list, by)
}

// refusedByAdmit counts and logs a set Admit refused. Called without f.mu.
func (f *Feed) refusedByAdmit(err error) {
	f.metrics.updates.WithLabelValues(f.o.Upstream, "refused").Inc()
	f.logger.Warn("discovery update refused; the current set keeps serving", "error", err.Error())
}

// changed tells Changed about an applied set.
func (f *Feed) changed(prev, next []Instance, by string) {
	if f.o.Changed != nil {
		f.o.Changed(prev, next, by)
	}
}

// Revert serves list again in place of the current set (the automatic
// rollback's revert of a set that hurt): applied and persisted as a
// snapshot without the guard, Admit or Changed; a held update is dropped.
func (f *Feed) Revert(list []Instance, now time.Time) {
	f.mu.Lock()
	f.mu.guard.held = nil
	f.applyLocked(list, nil, "rollback", now)
	f.mu.Unlock()
	f.applied()
}

// handle takes one source event.
func (f *Feed) handle(ev Event) {
	if ev.Err != nil {
		f.countRejections(ev.Update.Rejected)
		f.metrics.updates.WithLabelValues(f.o.Upstream, "refused").Inc()
		f.mu.Lock()
		first := f.mu.lastErr != ev.Err.Error()
		f.mu.lastErr = ev.Err.Error()
		f.mu.Unlock()
		if first {
			f.logger.Warn("registry update refused whole; the last good set keeps serving", "source", ev.Source, "error", ev.Err)
		}
		return
	}
	_, _ = f.offer(ev.Update, time.Now(), "registry")
}

// offer counts u's rejections, passes it through the delta guard and
// applies it if the guard lets it.
// An error is Admit's refusal: nothing changed (the guard was not asked).
func (f *Feed) offer(u Update, now time.Time, origin string) (Decision, error) {
	f.countRejections(u.Rejected)
	f.mu.Lock()
	if err := f.admit(u.Instances, origin); err != nil {
		f.mu.Unlock()
		f.refusedByAdmit(err)
		return Decision{}, err
	}
	d := f.mu.guard.offer(f.mu.current, u.Instances, now)
	if d.Action == Hold {
		f.mu.Unlock()
		f.metrics.updates.WithLabelValues(f.o.Upstream, "held").Inc()
		f.logger.Warn("registry update held by the delta guard", "drop_fraction", d.DropFraction, "held_for", d.HeldFor)
		return d, nil
	}
	prev := f.mu.current
	f.applyLocked(d.Instances, u.Rejected, origin, now)
	f.mu.Unlock()
	f.applied()
	f.changed(prev, d.Instances, origin)
	return d, nil
}

// Confirm applies the held update on an operator's word; ok is false when
// nothing is held. Taking the held set and applying it happen under one
// lock: an update that arrives meanwhile either comes first (and clears
// the hold, so nothing is confirmed) or after (and replaces the confirmed
// set), never in between.
func (f *Feed) Confirm(now time.Time) (d Decision, ok bool) {
	f.mu.Lock()
	d, ok = f.mu.guard.confirm(now)
	if !ok {
		f.mu.Unlock()
		return d, false
	}
	if f.confirmHook != nil {
		f.confirmHook()
	}
	if err := f.admit(d.Instances, "confirm"); err != nil {
		f.mu.Unlock()
		f.refusedByAdmit(err)
		return Decision{}, false
	}
	prev := f.mu.current
	f.applyLocked(d.Instances, f.mu.rejected, "registry", now)
	f.mu.Unlock()
	f.logger.Info("held registry update confirmed by an operator", "drop_fraction", d.DropFraction)
	f.applied()
	f.changed(prev, d.Instances, "confirm")
	return d, true
}

// applyLocked makes list the served set. Called with f.mu held; the caller
// calls f.applied after releasing it.
func (f *Feed) applyLocked(list []Instance, rejected []Rejection, origin string, now time.Time) {
	f.mu.current, f.mu.rejected, f.mu.origin, f.mu.updated, f.mu.lastErr = list, rejected, origin, now, ""
	f.mu.version++
}

// applied counts an applied set, writes the snapshot and asks the gateway
// to swap the upstream's endpoints. Called without f.mu.
func (f *Feed) applied() {
	f.metrics.updates.WithLabelValues(f.o.Upstream, "applied").Inc()
	f.persist()
	f.o.Applied()
}

// persist writes the latest applied set as the snapshot unless a
// concurrent call already did. Two applies racing may both get here; the
// version check keeps an older set from being written after a newer one.
func (f *Feed) persist() {
	f.persistMu.Lock()
	defer f.persistMu.Unlock()
	f.mu.Lock()
	list, version := f.mu.current, f.mu.version
	f.mu.Unlock()
	if version == f.persisted {
		return
	}
	f.persisted = version
	if err := WriteSnapshot(f.o.StateDir, f.o.Upstream, list); err != nil {
		f.logger.Error("writing the discovery snapshot failed; the update is served but would not survive a restart", "error", err)
	}
}

// countRejections counts every quarantined instance and logs each distinct
// problem once.
func (f *Feed) countRejections(rs []Rejection) {
	for _, r := range rs {
		f.metrics.rejected.WithLabelValues(f.o.Upstream, string(r.Reason)).Inc()
		if f.dedupe.First(Problem{Upstream: f.o.Upstream, Address: r.Key, Reason: r.Reason, Raw: r.Raw}) {
			f.logger.Warn("registry instance quarantined", "key", r.Key, "reason", r.Reason, "raw", r.Raw, "detail", r.Message)
		}
	}
}

// Instances returns the feed's current set and where it came from
// ("registry", "push", "snapshot", "config" or "" for none yet).
func (f *Feed) Instances() ([]Instance, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.current, f.mu.origin
}

// FeedState is a feed's state for the admin API.
type FeedState struct {
	Origin   string
	Updated  time.Time
	LastErr  string
	Rejected []Rejection
	// Held is set while the delta guard holds an update back.
	Held *Held
}

// State returns the feed's state, read in one critical section.
func (f *Feed) State() FeedState {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := FeedState{Origin: f.mu.origin, Updated: f.mu.updated, LastErr: f.mu.lastErr, Rejected: f.mu.rejected}
	if h, ok := f.mu.guard.heldNow(); ok {
		s.Held = &h
	}
	return s
}

// PushResult is what an admin push did.
type PushResult struct {
	// Decision is the guard's: Apply (served now) or Hold.
	Decision Decision
	// Instances counts the instances accepted from the list.
	Instances int
	// Rejected are the instances quarantined, also on error.
	Rejected []Rejection
}

// Push offers an endpoint list sent to the admin API. On error (a
// *PayloadError or a Limits error) the list was refused whole and nothing
// changed; the result still lists the rejections.
func (f *Feed) Push(body []byte, now time.Time) (PushResult, error) {
	u, err := ParseList(body, f.o.Limits)
	if err != nil {
		f.countRejections(u.Rejected)
		f.metrics.updates.WithLabelValues(f.o.Upstream, "refused").Inc()
		return PushResult{Rejected: u.Rejected}, err
	}
	d, err := f.offer(u, now, "push")
	if err != nil {
		return PushResult{Rejected: u.Rejected}, err
	}
	return PushResult{Decision: d, Instances: len(u.Instances), Rejected: u.Rejected}, nil
}

// AppendReadyNotes appends /readyz's notes on the feed to notes: serving
// from its snapshot, or from nothing, because its registry has not
// delivered since start; its registry unreachable.
func (f *Feed) AppendReadyNotes(notes []string) []string {
	_, origin := f.Instances()
	up, src := f.o.Upstream, f.SourceName()
	switch origin {
	case "snapshot":
		notes = append(notes, "upstream "+up+": serving from its last good snapshot; "+src+" has not delivered since start")
	case "":
		notes = append(notes, "upstream "+up+": no endpoints yet; waiting for "+src)
	}
	if !f.Connected() {
		notes = append(notes, "upstream "+up+": "+src+" is unreachable")
	}
	return notes
}
