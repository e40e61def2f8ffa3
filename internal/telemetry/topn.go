package telemetry

import (
	"cmp"
	"slices"
)

// TopN decides, for one family of counters keyed by an unbounded name (an
// app, an endpoint), which keys get a label of their own; the rest are
// summed under "other". It serves levee_app_* (proxy/appmetrics.go) and
// levee_endpoint_* (health/endpointmetrics.go), one TopN per label space.
//
// The rule, at each scrape (Scrape):
//   - while fewer than n keys are labelled, unlabelled keys are promoted,
//     the busiest first (highest Rank; ties by key order, so keys never
//     seen busy are promoted by name or address), idle keys included;
//   - a label sticks while its key exists;
//   - a promoted key's series starts at 0: what it had counted before its
//     promotion stays in "other", so every series is monotonic, as a
//     counter must be;
//   - a key that leaves (or is made anew: another Source under the same
//     key) keeps in "other" what it had contributed there; its own series,
//     if it had one, ends, and its label is free for the next.
//
// Memory is bounded by the keys of the last scrape. Not safe for
// concurrent use: a collector serialises its scrapes.
type TopN struct {
	n     int
	width int
	// labelled maps a labelled key to its counts at promotion (kept in
	// "other"); at most n entries.
	labelled map[string][]uint64
	// last is each key's counts at the previous scrape with the source
	// they were read from; bounded by the keys of that scrape.
	last map[string]TopNEntry
	// retired sums what keys gone since had contributed to "other".
	retired []uint64
	// otherSeen is set once "other" was needed: it then stays.
	otherSeen bool
}

// TopNEntry is one key's counters at a scrape.
type TopNEntry struct {
	Key string
	// Source identifies the counters the counts were read from (a
	// pointer): a key whose Source changed was made anew, from 0.
	Source any
	// Counts are the key's counters (width of the TopN), monotonic while
	// Source is the same.
	Counts []uint64
	// Rank is how busy the key is (the family's own measure, e.g.
	// requests answered): the busiest are promoted first.
	Rank uint64
}

// NewTopN returns a labeller of at most n keys over counters of width
// values each.
func NewTopN(n, width int) *TopN {
	return &TopN{n: n, width: width, labelled: map[string][]uint64{}, last: map[string]TopNEntry{}, retired: make([]uint64, width)}
}

// Scrape updates the labelling from entries (the keys that exist now, each
// once) and returns each labelled key's own counts (its counts less those
// at its promotion) and what "other" sums. otherNeeded reports whether
// "other" has been needed at this scrape or any before (a key unlabelled,
// or something counted in it): a family that reports "other" only when it
// is needed keeps reporting it from then on.
func (t *TopN) Scrape(entries []TopNEntry) (own map[string][]uint64, other []uint64, otherNeeded bool) {
	now := make(map[string]TopNEntry, len(entries))
	for _, e := range entries {
		now[e.Key] = e
	}
	for key, l := range t.last {
		if cur, ok := now[key]; ok && cur.Source == l.Source {
			continue
		}
		part := l.Counts
		if off, ok := t.labelled[key]; ok {
			part = off
			delete(t.labelled, key)
		}
		addCounts(t.retired, part)
	}
	t.last = now
	if free := t.n - len(t.labelled); free > 0 {
		var cands []TopNEntry
		for _, e := range entries {
			if _, ok := t.labelled[e.Key]; !ok {
				cands = append(cands, e)
			}
		}
		slices.SortFunc(cands, func(a, b TopNEntry) int {
			if c := cmp.Compare(b.Rank, a.Rank); c != 0 {
				return c
			}
			return cmp.Compare(a.Key, b.Key)
		})
		for _, e := range cands[:min(free, len(cands))] {
			t.labelled[e.Key] = slices.Clone(e.Counts)
		}
	}
	other = slices.Clone(t.retired)
	own = make(map[string][]uint64, len(t.labelled))
	for _, e := range entries {
		off, ok := t.labelled[e.Key]
		if !ok {
			t.otherSeen = true
			addCounts(other, e.Counts)
			continue
		}
		addCounts(other, off)
		d := make([]uint64, t.width)
		for i := range d {
			d[i] = e.Counts[i] - off[i]
		}
		own[e.Key] = d
	}
	if slices.ContainsFunc(other, func(v uint64) bool { return v != 0 }) {
		t.otherSeen = true
	}
	return own, other, t.otherSeen
}

func addCounts(a, b []uint64) {
	for i := range a {
		a[i] += b[i]
	}
}
