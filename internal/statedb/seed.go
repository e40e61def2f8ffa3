package statedb

// The precedence rule between the configuration file and runtime changes,
// shared by every store the file seeds (docs/apps.md, "Precedence: the
// file seeds, runtime changes win"). Each store keeps, per entry, the
// hash of the file definition it last seeded from, whether the entry was
// first defined by the file, whether it was changed at runtime since, and
// a tombstone (with the hash) for a file entry deleted at runtime; Decide
// turns those into what seeding does with an entry the file lists.

// Entry is what a store knows of one id the file lists.
type Entry struct {
	// Exists: the store holds the entry.
	Exists bool
	// Tombstone is the file definition's hash recorded when the entry was
	// deleted at runtime ("" when there is no tombstone). Read only when
	// !Exists.
	Tombstone string
	// FileHash is the hash of the file definition last seeded ("" for an
	// entry created at runtime).
	FileHash string
	// FromFile: the entry was first defined by the file.
	FromFile bool
	// Overridden: changed at runtime since the file last seeded it.
	Overridden bool
}

// Action is what seeding does with one entry the file lists.
type Action int

// The actions of Decide.
const (
	// Create the entry from the file: first sight, or a tombstone whose
	// file definition has since changed (the tombstone is dropped).
	Create Action = iota
	// StayDeleted: deleted at runtime, and the file's definition is still
	// the one that was deleted.
	StayDeleted
	// Unchanged: the file's definition is the one last seeded; whatever
	// was changed at runtime stays. A pending-file-change mark is cleared.
	Unchanged
	// Apply the file's changed definition: the entry was not changed at
	// runtime since the last seeding.
	Apply
	// KeepRuntime: the file's definition changed but the entry was changed
	// at runtime (or created at runtime under the same id): the runtime
	// version stays, marked pending_file_change, with a warning.
	KeepRuntime
)

// Decide returns what seeding does with an entry whose file definition
// hashes to hash.
func Decide(e Entry, hash string) Action {
	switch {
	case !e.Exists && e.Tombstone == hash:
		return StayDeleted
	case !e.Exists:
		return Create
	case e.FileHash == hash:
		return Unchanged
	case e.FromFile && !e.Overridden:
		return Apply
	default:
		return KeepRuntime
	}
}

// SeedResult says what seeding did with each entry, by id.
type SeedResult struct {
	// Created: new in the store from the file (first sight, or a
	// tombstone whose file definition has since changed).
	Created []string
	// Updated: the file's definition changed and the entry had not been
	// changed at runtime, so the file's version was applied.
	Updated []string
	// Unchanged: the file's definition is the one last seeded.
	Unchanged []string
	// KeptRuntime: the file's definition changed (or the id belongs to an
	// entry created at runtime, or the file no longer lists a file entry)
	// but the entry was changed at runtime, so the runtime version was
	// kept and its pending-file-change mark set. Each is logged as a
	// warning.
	KeptRuntime []string
	// StayedDeleted: deleted at runtime, and the file's definition is
	// still the one that was deleted.
	StayedDeleted []string
	// Removed: file entries the file no longer lists and that were not
	// changed at runtime.
	Removed []string
	// Failed: entries that could not be seeded; the rest were seeded.
	Failed map[string]error
}

// Record notes that seeding did a with entry id.
func (r *SeedResult) Record(a Action, id string) {
	out := map[Action]*[]string{Create: &r.Created, StayDeleted: &r.StayedDeleted, Unchanged: &r.Unchanged,
		Apply: &r.Updated, KeepRuntime: &r.KeptRuntime}[a]
	*out = append(*out, id)
}
