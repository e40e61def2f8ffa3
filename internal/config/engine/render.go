package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// ordered is a JSON object whose members keep the table's order.
type ordered []member

type member struct {
	key string
	val any
}

// MarshalJSON writes the members in order.
func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.val)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Renderer renders a value read by the tables back as the file it means
// (Render): each field at its effective value, in the tables' names and
// order, as JSON. Its fields say what is the client's own: the fields
// whose Go form is not the file's, the maps that keep the file's order,
// the fields a value of some type leaves out, and the secrets' stand-in.
type Renderer struct {
	// Special renders the fields whose Go form is not the file's, by
	// "GoType.field"; a BlockValue result is rendered as its block.
	Special map[string]func(sv reflect.Value) any
	// MapOrders names, by a map's Go type, the field of the enclosing
	// struct that lists its keys in the file's order.
	MapOrders map[reflect.Type]string
	// Omit returns the fields that struct value sv leaves out; nil: none.
	Omit func(sv reflect.Value) []string
	// Redacted replaces the value of every secret field.
	Redacted string
}

// Render returns v (a pointer to the struct root describes) as indented
// JSON ending in a newline: every field at its effective value, secrets
// replaced by Redacted, fields that are unset and have no default left
// out.
func (rd *Renderer) Render(root *Block, v any) ([]byte, error) {
	out, err := rd.renderBlock(root, reflect.ValueOf(v).Elem(), "")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// FieldValue finds field f's Go value in struct sv (see fieldValue).
func (rd *Renderer) FieldValue(f *Field, sv reflect.Value, path string) (reflect.Value, bool, error) {
	return rd.fieldValue(f, sv, path)
}

// GoField returns sv's field whose name is name without underscores,
// compared without case (goField).
func GoField(sv reflect.Value, name string) (reflect.Value, bool) { return goField(sv, name) }

// renderBlock renders struct value sv (not a pointer) as block b. path is
// the block's field path, for errors.
func (rd *Renderer) renderBlock(b *Block, sv reflect.Value, path string) (ordered, error) {
	out := ordered{}
	var omit []string
	if rd.Omit != nil {
		omit = rd.Omit(sv)
	}
	for i := range b.Fields {
		f := &b.Fields[i]
		if slices.Contains(omit, f.Name) {
			continue
		}
		fp := Key(path, f.Name)
		v, ok, err := rd.fieldValue(f, sv, fp)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if bv, isBlock := valueOf(v).(BlockValue); isBlock {
			r, err := rd.renderBlock(bv.B, bv.V, fp)
			if err != nil {
				return nil, err
			}
			out = append(out, member{f.Name, r})
			continue
		}
		if f.Secret {
			if r, keep := rd.redact(v); keep {
				out = append(out, member{f.Name, r})
			}
			continue
		}
		var r any
		var keep bool
		if f.Kind == KindMap && v.Kind() == reflect.Map {
			var order []string
			if name, found := rd.MapOrders[v.Type()]; found {
				order = sv.FieldByName(name).Interface().([]string)
			}
			r, keep, err = rd.renderMap(f, v, order, fp)
		} else {
			r, keep, err = rd.renderValue(f, v, fp)
		}
		if err != nil {
			return nil, err
		}
		if keep {
			out = append(out, member{f.Name, r})
		}
	}
	return out, nil
}

// fieldValue finds field f's Go value in struct sv. ok is false when the
// value is absent (a nil pointer).
func (rd *Renderer) fieldValue(f *Field, sv reflect.Value, path string) (v reflect.Value, ok bool, err error) {
	if fn, found := rd.Special[sv.Type().Name()+"."+f.Name]; found {
		r := fn(sv)
		return reflect.ValueOf(r), r != nil, nil // nil: absent, as a nil pointer is
	}
	if gv, found := goField(sv, f.Name); found {
		for gv.Kind() == reflect.Pointer {
			if gv.IsNil() {
				return reflect.Value{}, false, nil
			}
			gv = gv.Elem()
		}
		return gv, true, nil
	}
	if f.Bind != nil && sv.CanAddr() {
		// Only reached by binds that return a place inside sv (data's
		// limits, which are fields of RouteData itself): opt binds name
		// pointer fields, which goField finds first, so nothing is
		// allocated here.
		return reflect.ValueOf(f.Bind(sv.Addr().Interface())).Elem(), true, nil
	}
	return reflect.Value{}, false, fmt.Errorf("config: effective: no Go field of %s for %s", sv.Type(), path)
}

// goField returns sv's field whose name is name without underscores,
// compared without case.
func goField(sv reflect.Value, name string) (reflect.Value, bool) {
	want := strings.ReplaceAll(name, "_", "")
	t := sv.Type()
	for i := range t.NumField() {
		if strings.EqualFold(t.Field(i).Name, want) {
			return sv.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// BlockValue is a special form's value rendered as block B.
type BlockValue struct {
	B *Block
	V reflect.Value
}

// redact replaces a secret value: each item of a list (so the count
// shows), the value itself otherwise. An empty value is left out (keep
// false): there is nothing to hide, and the reader sees it is unset.
func (rd *Renderer) redact(v reflect.Value) (out any, keep bool) {
	if v.IsZero() || v.Kind() == reflect.Slice && v.Len() == 0 {
		return nil, false
	}
	if v.Kind() == reflect.Slice {
		items := make([]string, v.Len())
		for i := range items {
			items[i] = rd.Redacted
		}
		return items, true
	}
	return rd.Redacted, true
}

// renderValue renders v as field f. keep is false for a value left out:
// a zero value of a field with no default that is not required.
func (rd *Renderer) renderValue(f *Field, v reflect.Value, path string) (out any, keep bool, err error) {
	if v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if !v.IsValid() {
		return nil, false, nil
	}
	if v.IsZero() && f.Def == nil && !f.Required && !zeroMeans(f) {
		return nil, false, nil
	}
	switch f.Kind {
	case KindBlock:
		r, err := rd.renderBlock(f.Sub, v, path)
		return r, true, err
	case KindMap:
		return rd.renderMap(f, v, nil, path)
	case KindList:
		if v.Kind() != reflect.Slice {
			return v.Interface(), true, nil // a special form's list
		}
		items := make([]any, 0, v.Len())
		for i := range v.Len() {
			iv := v.Index(i)
			if f.Item.Kind == KindBlock {
				r, err := rd.renderBlock(f.Item.Sub, iv, Index(path, i))
				if err != nil {
					return nil, false, err
				}
				items = append(items, r)
				continue
			}
			items = append(items, scalar(f.Item, iv))
		}
		return items, true, nil
	case KindEither:
		if v.Kind() == reflect.Slice { // a Go list of a field written as one item or a list: the list
			for i := range f.Either {
				if f.Either[i].Kind == KindList {
					return rd.renderValue(&f.Either[i], v, path)
				}
			}
		}
	}
	if k := v.Kind(); k == reflect.Struct || k == reflect.Map || k == reflect.Slice {
		// A Go form unlike the file's: it needs a special form, or its
		// Go field names would show.
		return nil, false, fmt.Errorf("config: effective: %s is a Go %s; add a special form for it", path, v.Type())
	}
	return scalar(f, v), true, nil
}

// zeroMeans reports whether a zero value of f, which has no fixed
// default, is one the file can say and differs from leaving f out: an
// integer whose bounds allow 0 (max_queue: 0 is no queue, omitted is
// derived from the limit). Zero strings, durations (which must be
// greater than 0), bools, numbers (a rate must be greater than 0), lists,
// maps and blocks read the same as omitted.
func zeroMeans(f *Field) bool {
	return (f.Kind == KindInt || f.Kind == KindSize) && f.Lo <= 0
}

// renderMap renders a kindMap: entries in order (the file's, which the
// Config keeps for some maps: mapOrders), else sorted by name.
func (rd *Renderer) renderMap(f *Field, v reflect.Value, order []string, path string) (any, bool, error) {
	if v.Kind() != reflect.Map {
		return nil, false, fmt.Errorf("config: effective: %s is a %s, not a map", path, v.Kind())
	}
	if v.Len() == 0 {
		return nil, false, nil
	}
	names := order
	if len(names) != v.Len() {
		names = make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			names = append(names, k.String())
		}
		slices.Sort(names)
	}
	out := ordered{}
	for _, name := range names {
		ev := v.MapIndex(reflect.ValueOf(name))
		for ev.Kind() == reflect.Pointer || ev.Kind() == reflect.Interface {
			if ev.IsNil() {
				break
			}
			ev = ev.Elem()
		}
		ep := Key(path, name)
		var r any
		var err error
		switch {
		case f.Sub != nil:
			r, err = rd.renderBlock(f.Sub, ev, ep)
		case f.Item != nil:
			r, _, err = rd.renderValue(f.Item, ev, ep)
		}
		if err != nil {
			return nil, false, err
		}
		out = append(out, member{name, r})
	}
	return out, true, nil
}

// scalar renders a leaf value: durations as Go duration strings, every
// other kind as its Go value (sizes as bytes).
func scalar(f *Field, v reflect.Value) any {
	if d, ok := v.Interface().(time.Duration); ok {
		return d.String()
	}
	return v.Interface()
}

// valueOf is v's value, nil for the zero Value (a special form's nil).
func valueOf(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	return v.Interface()
}
