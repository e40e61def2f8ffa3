package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
)

// This file renders a parsed Config back as the file it means: every field
// at its effective value (defaults applied), in the field tables' names
// and order, as JSON (which is YAML, so the output parses back into the
// same Config: TestEffectiveRoundTrips). GET /api/v1/config serves it.
//
// The walk is driven by the field tables (fields.go), so a new field is
// rendered as soon as it is described; a field's Go value is found by
// name (the file name without underscores equals the Go name, case
// aside: max_connections_per_ip is MaxConnectionsPerIP), else through its
// bind, else by one of the few hand-written forms below (max_concurrency,
// retry on, a data parameter's default/min/max). A field it cannot find
// is an error, and TestEffectiveCoversEveryField renders a Config with
// every pointer, list and map filled, so a field the renderer cannot
// reach fails there rather than vanishing from the endpoint.
//
// A field marked secret in its table is never rendered: its value is
// replaced by Redacted (each item of a list, so the count still shows).
// TestSecretFieldsMarked fails when a field whose name suggests a secret
// is neither marked secret nor says why it is not (notSecret).

// Redacted replaces the value of every secret field in Effective's output.
const Redacted = "[redacted]"

// Effective returns c as JSON in the file's shape: every field at its
// effective value, secrets replaced by Redacted, fields that are unset
// and have no default (an omitted optional block, a zero duration that
// means "none", an empty list that means "any") left out. The output is
// indented and ends in a newline.
func Effective(c *Config) ([]byte, error) {
	v, err := renderBlock(rootBlock, reflect.ValueOf(c).Elem(), "")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

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

// renderBlock renders struct value sv (not a pointer) as block b. path is
// the block's field path, for errors.
func renderBlock(b *engine.Block, sv reflect.Value, path string) (ordered, error) {
	out := ordered{}
	var omit []string
	if r, ok := sv.Interface().(Route); ok && r.Data != nil {
		omit = dataRouteOmits
	}
	for i := range b.Fields {
		f := &b.Fields[i]
		if slices.Contains(omit, f.Name) {
			continue
		}
		fp := engine.Key(path, f.Name)
		v, ok, err := fieldValue(f, sv, fp)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if bv, isBlock := valueOf(v).(blockValue); isBlock {
			r, err := renderBlock(bv.b, bv.v, fp)
			if err != nil {
				return nil, err
			}
			out = append(out, member{f.Name, r})
			continue
		}
		if f.Secret {
			if r, keep := redact(v); keep {
				out = append(out, member{f.Name, r})
			}
			continue
		}
		var r any
		var keep bool
		if f.Kind == engine.KindMap && v.Kind() == reflect.Map {
			var order []string
			if name, found := mapOrders[v.Type()]; found {
				order = sv.FieldByName(name).Interface().([]string)
			}
			r, keep, err = renderMap(f, v, order, fp)
		} else {
			r, keep, err = renderValue(f, v, fp)
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
func fieldValue(f *engine.Field, sv reflect.Value, path string) (v reflect.Value, ok bool, err error) {
	if fn, found := specialForms[sv.Type().Name()+"."+f.Name]; found {
		return reflect.ValueOf(fn(sv)), true, nil
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

// specialForms render the fields whose Go form is not the file's, by
// "GoType.field".
var specialForms = map[string]func(sv reflect.Value) any{
	// max_concurrency is a number or "adaptive".
	"Limits.max_concurrency": func(sv reflect.Value) any {
		l := sv.Interface().(Limits)
		if l.Adaptive {
			return adaptiveLimit
		}
		return l.MaxConcurrency
	},
	// on is a list of condition names and statuses.
	"Retry.on": func(sv reflect.Value) any {
		on := sv.Interface().(Retry).On
		list := []any{}
		for _, c := range []struct {
			set  bool
			name string
		}{{on.ConnectFailure, condConnectFailure}, {on.RefusedStream, condRefusedStream}, {on.ResetBeforeResponse, condResetBeforeResponse}} {
			if c.set {
				list = append(list, c.name)
			}
		}
		for _, s := range on.Statuses {
			list = append(list, s)
		}
		return list
	},
	// access is false, or the access log's settings (true is the block
	// at its defaults).
	"Log.access": func(sv reflect.Value) any {
		l := sv.Interface().(Log)
		if !l.Access {
			return false
		}
		return blockValue{accessLogBlock, reflect.ValueOf(l.AccessLog)}
	},
	// default, min and max are kept as written; "" is unset.
	"DataParam.default": func(sv reflect.Value) any { return optString(sv.Interface().(DataParam).Default) },
	"DataParam.min":     func(sv reflect.Value) any { return optString(sv.Interface().(DataParam).Min) },
	"DataParam.max":     func(sv reflect.Value) any { return optString(sv.Interface().(DataParam).Max) },
}

// blockValue is a special form's value rendered as block b.
type blockValue struct {
	b *engine.Block
	v reflect.Value
}

// optString is s, or nil (left out) when empty.
func optString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// redact replaces a secret value: each item of a list (so the count
// shows), the value itself otherwise. An empty value is left out (keep
// false): there is nothing to hide, and the reader sees it is unset.
func redact(v reflect.Value) (out any, keep bool) {
	if v.IsZero() || v.Kind() == reflect.Slice && v.Len() == 0 {
		return nil, false
	}
	if v.Kind() == reflect.Slice {
		items := make([]string, v.Len())
		for i := range items {
			items[i] = Redacted
		}
		return items, true
	}
	return Redacted, true
}

// renderValue renders v as field f. keep is false for a value left out:
// a zero value of a field with no default that is not required.
func renderValue(f *engine.Field, v reflect.Value, path string) (out any, keep bool, err error) {
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
	case engine.KindBlock:
		r, err := renderBlock(f.Sub, v, path)
		return r, true, err
	case engine.KindMap:
		return renderMap(f, v, nil, path)
	case engine.KindList:
		if v.Kind() != reflect.Slice {
			return v.Interface(), true, nil // a special form's list
		}
		items := make([]any, 0, v.Len())
		for i := range v.Len() {
			iv := v.Index(i)
			if f.Item.Kind == engine.KindBlock {
				r, err := renderBlock(f.Item.Sub, iv, engine.Index(path, i))
				if err != nil {
					return nil, false, err
				}
				items = append(items, r)
				continue
			}
			items = append(items, scalar(f.Item, iv))
		}
		return items, true, nil
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
func zeroMeans(f *engine.Field) bool {
	return (f.Kind == engine.KindInt || f.Kind == engine.KindSize) && f.Lo <= 0
}

// renderMap renders a kindMap: entries in order (the file's, which the
// Config keeps for some maps: mapOrders), else sorted by name.
func renderMap(f *engine.Field, v reflect.Value, order []string, path string) (any, bool, error) {
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
		ep := engine.Key(path, name)
		var r any
		var err error
		switch {
		case f.Sub != nil:
			r, err = renderBlock(f.Sub, ev, ep)
		case f.Item != nil:
			r, _, err = renderValue(f.Item, ev, ep)
		}
		if err != nil {
			return nil, false, err
		}
		out = append(out, member{name, r})
	}
	return out, true, nil
}

// mapOrders names the Config lists that keep a map's entries in the
// file's order, by the map's Go type.
var mapOrders = map[reflect.Type]string{
	reflect.TypeFor[map[string]*Upstream]():   "UpstreamOrder",
	reflect.TypeFor[map[string]*DataSource](): "DataSourceOrder",
	reflect.TypeFor[map[string]*DataParam]():  "ParamOrder",
}

// scalar renders a leaf value: durations as Go duration strings, every
// other kind as its Go value (sizes as bytes).
func scalar(f *engine.Field, v reflect.Value) any {
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
