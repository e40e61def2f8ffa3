package engine

import "reflect"

// Each field's table entry says what a reload does with a change to it
// (Field.Reload: applied, or a restart needed); ReloadRefusals
// applies those entries, so the gateway's reload check is derived from the
// tables and docs/configuration.md's field reference shows the same rule.

// ReloadRefusals returns, in the field tables' order, one error per field
// of root whose change from old to next (pointers to the struct root
// describes) a reload cannot apply: those whose entry says Restart (any
// change) or RestartOnOff (set or omitted). nil when a reload may replace
// old with next. It walks from root through every block that is a struct
// (not into lists or maps), finding values as Render does.
func (rd *Renderer) ReloadRefusals(root *Block, old, next any) Errors {
	var errs Errors
	rd.reloadWalk(root, reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem(), "", &errs)
	return errs
}

// reloadWalk compares the fields of block b in struct values a and b2
// (same type), appending a refusal for each marked field that differs and
// descending into the sub-blocks present in both. A block is only entered
// through a present struct value, one level of the file per call, so the
// walk is as deep as the tables.
func (rd *Renderer) reloadWalk(b *Block, a, b2 reflect.Value, path string, errs *Errors) {
	for i := range b.Fields {
		f := &b.Fields[i]
		p := Key(path, f.Name)
		va, oka, erra := rd.fieldValue(f, a, p)
		vb, okb, errb := rd.fieldValue(f, b2, p)
		if erra != nil || errb != nil {
			// Only lists and maps of blocks have no Go field of their
			// name in every struct; nothing in them needs a restart
			// (TestFieldTableDrivesDefaultsReloadAndDocs checks that each
			// marked field is reached).
			continue
		}
		switch f.Reload {
		case Restart:
			if oka != okb || oka && !reflect.DeepEqual(plain(va), plain(vb)) {
				*errs = append(*errs, FieldError{Path: p, Message: ReloadRestartMessage})
			}
			continue
		case RestartOnOff:
			if oka != okb {
				*errs = append(*errs, FieldError{Path: p, Message: ReloadOnOffMessage})
				continue
			}
		}
		if f.Kind == KindBlock && f.Sub != nil && oka && okb && va.Kind() == reflect.Struct {
			rd.reloadWalk(f.Sub, va, vb, p, errs)
		}
	}
}

// plain is v's value to compare: a special form's BlockValue by the value
// it renders (its reflect.Value differs between two copies that are equal).
func plain(v reflect.Value) any {
	x := v.Interface()
	if bv, ok := x.(BlockValue); ok {
		return bv.V.Interface()
	}
	return x
}
