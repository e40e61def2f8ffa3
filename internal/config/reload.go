package config

import (
	"reflect"

	"github.com/levee-gw/levee/internal/config/engine"
)

// Each field's table entry says what a reload does with a change to it
// (engine.Field.Reload: applied, or a restart needed); ReloadRefusals
// applies those entries, so the gateway's reload check is derived from the
// tables and docs/configuration.md's field reference shows the same rule.

// ReloadRefusals returns, in the field tables' order, one error per field
// whose change from old to next a reload cannot apply: those whose table
// entry says restart (any change) or engine.RestartOnOff (set or omitted). nil
// when a reload may replace old with next. The rule is the tables', walked
// from the root through every block that is a struct (not into lists or
// maps, where no field needs a restart), so a field marked in its table
// is enforced without code elsewhere; TestFieldTableDrivesDefaultsReloadAndDocs
// checks each marked field is refused and each other one is not.
func ReloadRefusals(old, next *Config) Errors {
	var errs Errors
	reloadWalk(rootBlock, reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem(), "", &errs)
	return errs
}

// reloadWalk compares the fields of block b in struct values a and b2
// (same type), appending a refusal for each marked field that differs and
// descending into the sub-blocks present in both. A block is only entered
// through a present struct value, one level of the file per call, so the
// walk is as deep as the tables.
func reloadWalk(b *engine.Block, a, b2 reflect.Value, path string, errs *Errors) {
	for i := range b.Fields {
		f := &b.Fields[i]
		p := engine.Key(path, f.Name)
		va, oka, erra := fieldValue(f, a, p)
		vb, okb, errb := fieldValue(f, b2, p)
		if erra != nil || errb != nil {
			// Only lists and maps of blocks have no Go field of their
			// name in every struct; nothing in them needs a restart
			// (TestFieldTableDrivesDefaultsReloadAndDocs checks that each
			// marked field is reached).
			continue
		}
		switch f.Reload {
		case engine.Restart:
			if oka != okb || oka && !reflect.DeepEqual(va.Interface(), vb.Interface()) {
				*errs = append(*errs, FieldError{Path: p, Message: engine.ReloadRestartMessage})
			}
			continue
		case engine.RestartOnOff:
			if oka != okb {
				*errs = append(*errs, FieldError{Path: p, Message: engine.ReloadOnOffMessage})
				continue
			}
		}
		if f.Kind == engine.KindBlock && f.Sub != nil && oka && okb && va.Kind() == reflect.Struct {
			reloadWalk(f.Sub, va, vb, p, errs)
		}
	}
}
