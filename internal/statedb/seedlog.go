package statedb

// LogArgs are r's counts as log attributes (created, updated, unchanged,
// kept_runtime, stayed_deleted, removed, failed), for the line each store
// logs after seeding.
func (r SeedResult) LogArgs() []any {
	return []any{"created", len(r.Created), "updated", len(r.Updated), "unchanged", len(r.Unchanged),
		"kept_runtime", len(r.KeptRuntime), "stayed_deleted", len(r.StayedDeleted), "removed", len(r.Removed), "failed", len(r.Failed)}
}
