package config

import (
	"reflect"

	"github.com/levee-gw/levee/internal/config/engine"
)

// reloadRule is what a reload does with a change to one field. Each
// field's table entry says it (field.reload); ReloadRefusals applies the
// rule and docs/configuration.md's field reference shows it, so the
// gateway's reload check and the docs cannot disagree with the table.
type reloadRule uint8

const (
	// reloadApplied: a reload applies the new value (the zero value, so
	// a field says nothing unless it needs a restart).
	reloadApplied reloadRule = iota
	// restart: any change to the field (a block: to any of its fields,
	// or setting or omitting it) needs a restart.
	restart
	// restartOnOff: setting or omitting the block needs a restart; a
	// change inside it is applied (tls: new certificate files are read).
	restartOnOff
)

// The messages of a refused reload, by rule.
const (
	reloadRestartMessage = "cannot change on reload (restart levee)"
	reloadOnOffMessage   = "cannot be turned on or off on reload (restart levee)"
)

// describe returns the rule as the docs' field reference shows it.
func (r reloadRule) describe() string {
	switch r {
	case restart:
		return "restart"
	case restartOnOff:
		return "restart to set or omit"
	default:
		return "reload"
	}
}

// ReloadRefusals returns, in the field tables' order, one error per field
// whose change from old to next a reload cannot apply: those whose table
// entry says restart (any change) or restartOnOff (set or omitted). nil
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
func reloadWalk(b *block, a, b2 reflect.Value, path string, errs *Errors) {
	for i := range b.fields {
		f := &b.fields[i]
		p := engine.Key(path, f.name)
		va, oka, erra := fieldValue(f, a, p)
		vb, okb, errb := fieldValue(f, b2, p)
		if erra != nil || errb != nil {
			// Only lists and maps of blocks have no Go field of their
			// name in every struct; nothing in them needs a restart
			// (TestFieldTableDrivesDefaultsReloadAndDocs checks that each
			// marked field is reached).
			continue
		}
		switch f.reload {
		case restart:
			if oka != okb || oka && !reflect.DeepEqual(va.Interface(), vb.Interface()) {
				*errs = append(*errs, FieldError{Path: p, Message: reloadRestartMessage})
			}
			continue
		case restartOnOff:
			if oka != okb {
				*errs = append(*errs, FieldError{Path: p, Message: reloadOnOffMessage})
				continue
			}
		}
		if f.kind == kindBlock && f.sub != nil && oka && okb && va.Kind() == reflect.Struct {
			reloadWalk(f.sub, va, vb, p, errs)
		}
	}
}
