package gateway

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/discovery"
	"github.com/levee-gw/levee/internal/rollback"
)

// The automatic rollback of the changes that are not a file or a data API
// (docs/rollback.md): an upstream's endpoint set replaced by its discovery
// feed (kind registry: a registry update the guard accepted; kind admin:
// an admin push or an operator's confirm of a held update) and a route's
// split weights changed through the admin API (kind admin). Each is a
// version watched like a reload; one that hurt is reverted (the endpoint
// set or the weights served before) and its content pinned, so the same
// set or weights are refused when they come again.

// endpointsSubject is the Subject of upstream name's endpoint-set versions
// (one subject for both kinds: a set pinned after a push is refused from
// the registry too, and the other way round).
func endpointsSubject(name string) string { return "upstream/" + name }

// splitSubject is the Subject of route name's split-weight versions.
func splitSubject(name string) string { return "split/" + name }

// endpointsDigest identifies upstream name's endpoint set: the upstream's
// name and the set's address, weight and zone lines, sorted (the order a
// registry lists them in, and metadata, do not make another version).
func endpointsDigest(name string, list []discovery.Instance) string {
	lines := make([]string, len(list))
	for i, in := range list {
		lines[i] = in.Address + " " + strconv.FormatUint(uint64(in.Weight), 10) + " " + in.Zone
	}
	slices.Sort(lines)
	return rollback.Digest([]byte(name + "\n" + strings.Join(lines, "\n")))
}

// endpointsKind is the kind of a set applied by by (the feed's Admit and
// Changed argument).
func endpointsKind(by string) rollback.Kind {
	if by == "push" || by == "confirm" {
		return rollback.KindAdmin
	}
	return rollback.KindRegistry
}

// admitEndpoints refuses (counted, logged by the feed) an endpoint set of
// upstream name pinned as bad. Called with the feed's mutex held: it only
// reads the store.
func (g *Gateway) admitEndpoints(name string, list []discovery.Instance, by string) error {
	rb := g.rb
	if rb.store == nil {
		return nil
	}
	subject, digest := endpointsSubject(name), endpointsDigest(name, list)
	pin, ok := rb.store.Pinned(rollback.KindRegistry, subject, digest)
	if !ok {
		pin, ok = rb.store.Pinned(rollback.KindAdmin, subject, digest)
	}
	if !ok {
		return nil
	}
	rb.metrics.Refused(endpointsKind(by))
	return fmt.Errorf("upstream %s: this endpoint set (%d endpoints) is version %d's, rolled back as bad at %s (%s); unpin version %d to allow it: %w",
		name, len(list), pin.Version, pin.At.Format(time.RFC3339), pin.Reason, pin.Version, admin.ErrPinned)
}

// endpointsChanged records the set next, applied in place of prev on
// upstream name's feed f, as a version and watches it; its revert serves
// prev again.
func (g *Gateway) endpointsChanged(name string, f *discovery.Feed, prev, next []discovery.Instance, by string) {
	rb := g.rb
	if rb.store == nil || f == nil {
		return
	}
	if len(prev) == 0 {
		// The first set after none (a feed's first delivery): reverting to
		// no endpoints cannot help, and the 503s answered before it
		// arrived must not be laid on it.
		return
	}
	digest := endpointsDigest(name, next)
	if digest == endpointsDigest(name, prev) {
		return // the same set again (a re-read registry, metadata only)
	}
	kind, subject, now := endpointsKind(by), endpointsSubject(name), time.Now()
	n, err := rb.store.Record(now, kind, subject, digest, rollback.StateWatching)
	if err != nil {
		g.logger.Error("rollback: recording an endpoint-set version", "upstream", name, "error", err)
		return
	}
	prev = slices.Clone(prev)
	revert := func() error {
		f.Revert(prev, time.Now())
		return nil
	}
	g.watchChange(now, rollback.Change{Version: n, Kind: kind, Subject: subject, Digest: digest}, pendingChange{revert: revert})
}

// checkConfirmPinned refuses an operator's confirm of a held set that is
// pinned (the feed's Admit refuses it too; this gives the admin API the
// reason).
func (g *Gateway) checkConfirmPinned(f *feed) error {
	h := f.State().Held
	if h == nil {
		return nil
	}
	return g.admitEndpoints(f.upstream, h.Instances, "confirm")
}

// splitDigest identifies route name's split weights (in the file's side
// order).
func splitDigest(name string, weights []int) string {
	var b strings.Builder
	b.WriteString(name)
	for _, w := range weights {
		b.WriteString(" " + strconv.Itoa(w))
	}
	return rollback.Digest([]byte(b.String()))
}

// checkSplitPinned refuses weights of route name pinned as bad. g.mu
// held (it only reads the store).
func (g *Gateway) checkSplitPinned(name string, weights []int) error {
	rb := g.rb
	if rb.store == nil {
		return nil
	}
	pin, ok := rb.store.Pinned(rollback.KindAdmin, splitSubject(name), splitDigest(name, weights))
	if !ok {
		return nil
	}
	rb.metrics.Refused(rollback.KindAdmin)
	return fmt.Errorf("route %s: weights %v are version %d's, rolled back as bad at %s (%s); unpin version %d to allow them: %w",
		name, weights, pin.Version, pin.At.Format(time.RFC3339), pin.Reason, pin.Version, admin.ErrPinned)
}

// splitChanged records route name's weights, changed from prev by the
// admin API, as a version and watches it; its revert sets prev again.
// Called without g.mu.
func (g *Gateway) splitChanged(name string, upstreams []string, prev, weights []int) {
	rb := g.rb
	if rb.store == nil || slices.Equal(prev, weights) || len(prev) != len(upstreams) {
		return
	}
	now, digest := time.Now(), splitDigest(name, weights)
	n, err := rb.store.Record(now, rollback.KindAdmin, splitSubject(name), digest, rollback.StateWatching)
	if err != nil {
		g.logger.Error("rollback: recording a split version", "route", name, "error", err)
		return
	}
	revert := func() error {
		sides := make([]admin.SplitSideView, len(prev))
		for i, u := range upstreams {
			sides[i] = admin.SplitSideView{Upstream: u, Weight: prev[i]}
		}
		_, _, err := g.setSplit(name, sides, false)
		return err
	}
	g.watchChange(now, rollback.Change{Version: n, Kind: rollback.KindAdmin, Subject: splitSubject(name), Digest: digest}, pendingChange{revert: revert})
}
