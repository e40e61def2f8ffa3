package dataapis

import (
	"sort"
	"strconv"
)

// Fleet is what one node of a fleet (cluster.etcd) serves of the shared
// store: every node compiles what it receives against its own data
// sources, and a published version it cannot compile is not served
// there: the node keeps the version of that API it served before
// (docs/cluster.md, "Data APIs"). Fleet remembers those versions; not
// safe for concurrent use (the gateway holds its lock).
type Fleet struct {
	// Node is this node's id, written into each status.
	Node string
	// last is the version served of each API (bounded by MaxAPIs: an API
	// no longer published is forgotten).
	last map[string]Serving
	// failures counts the versions that did not compile here, by API
	// (bounded by MaxAPIs: counted once per API and version).
	failures map[string]uint64
	counted  map[string]int
}

// Resolve returns snap with each published version that this node
// cannot read (parse fails) replaced by the version of that API it
// served before, when there is one and it still reads, and the status
// of each published API here. A version that reads can still be left
// out of the table by a route conflict: Left marks those.
func (f *Fleet) Resolve(snap *Snapshot, parse func(name string, def []byte) error) (*Snapshot, []NodeStatus) {
	if f.last == nil {
		f.last, f.failures, f.counted = map[string]Serving{}, map[string]uint64{}, map[string]int{}
	}
	out := &Snapshot{Count: snap.Count, Runtime: snap.Runtime, Serving: make([]Serving, 0, len(snap.Serving))}
	sts := make([]NodeStatus, 0, len(snap.Serving))
	published := make(map[string]bool, len(snap.Serving))
	for _, sv := range snap.Serving {
		published[sv.Name] = true
		st := NodeStatus{Node: f.Node, API: sv.Name, Version: sv.Version, State: NodeServing, Published: sv.Version}
		err := parse(sv.Name, sv.Definition)
		if err == nil {
			f.last[sv.Name] = sv
			out.Serving = append(out.Serving, sv)
			sts = append(sts, st)
			continue
		}
		st.Error = "version " + strconv.Itoa(sv.Version) + " does not compile here: " + oneLine(err)
		if f.counted[sv.Name] != sv.Version {
			f.counted[sv.Name] = sv.Version
			f.failures[sv.Name]++
		}
		if prev, ok := f.last[sv.Name]; ok && prev.Version != sv.Version && parse(prev.Name, prev.Definition) == nil {
			st.Version, st.State = prev.Version, NodePrevious
			out.Serving = append(out.Serving, prev)
		} else {
			st.Version, st.State = 0, NodeFailed
		}
		sts = append(sts, st)
	}
	for name := range f.last {
		if !published[name] {
			delete(f.last, name)
		}
	}
	for name := range f.counted {
		if !published[name] {
			delete(f.counted, name)
		}
	}
	if len(f.failures) > MaxAPIs { // names of APIs long gone: start over
		f.failures = map[string]uint64{}
	}
	return out, sts
}

// Failures returns the compile failures counted per API (a copy).
func (f *Fleet) Failures() map[string]uint64 {
	out := make(map[string]uint64, len(f.failures))
	for k, v := range f.failures {
		out[k] = v
	}
	return out
}

// Left marks the statuses of the APIs that were left out of the table
// after all (in gone, with why) as serving nothing here.
func Left(sts []NodeStatus, gone map[string]string) []NodeStatus {
	for i := range sts {
		if why, ok := gone[sts[i].API]; ok {
			sts[i].Version, sts[i].State, sts[i].Error = 0, NodeFailed, why
		}
	}
	sort.Slice(sts, func(i, j int) bool { return sts[i].API < sts[j].API })
	return sts
}
