package config

// Each field's table entry says what a reload does with a change to it
// (engine.Field.Reload: applied, or a restart needed); ReloadRefusals
// applies those entries, so the gateway's reload check is derived from the
// tables and docs/configuration.md's field reference shows the same rule.

// ReloadRefusals returns, in the field tables' order, one error per field
// whose change from old to next a reload cannot apply: those whose table
// entry says restart (any change) or RestartOnOff (set or omitted). nil
// when a reload may replace old with next. The rule is the tables', walked
// from the root through every block that is a struct (not into lists or
// maps, where no field needs a restart), so a field marked in its table
// is enforced without code elsewhere; TestFieldTableDrivesDefaultsReloadAndDocs
// checks each marked field is refused and each other one is not.
func ReloadRefusals(old, next *Config) Errors {
	return effectiveRenderer.ReloadRefusals(rootBlock, old, next)
}
