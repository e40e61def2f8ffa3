package config

import (
	"github.com/levee-gw/levee/internal/dataquery"
	"reflect"

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
func Effective(c *Config) ([]byte, error) { return effectiveRenderer.Render(rootBlock, c) }

// effectiveRenderer is the engine's renderer with config's own forms.
var effectiveRenderer = &engine.Renderer{
	Special:   specialForms,
	MapOrders: mapOrders,
	Omit: func(sv reflect.Value) []string {
		if r, ok := sv.Interface().(Route); ok && r.Data != nil {
			return dataRouteOmits // a data route has no body, trailers or upgrades
		}
		if m, ok := sv.Interface().(Match); ok && m.PathKind() != "path_prefix" {
			return matchPrefixOmit // its default stands aside for the kind given
		}
		return nil
	},
	Redacted: Redacted,
}

// fieldValue finds field f's Go value in struct sv: a special form's, or
// the Go field of its name; ok is false when the value is absent (a nil
// pointer). ReloadRefusals and the tests find values with it.
func fieldValue(f *engine.Field, sv reflect.Value, path string) (reflect.Value, bool, error) {
	return effectiveRenderer.FieldValue(f, sv, path)
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
		for _, s := range on.GRPC {
			list = append(list, s)
		}
		for _, s := range on.Statuses {
			list = append(list, s)
		}
		return list
	},
	// access is false, or the access log's settings (true is the block
	// at its defaults).
	// memory is off, the block, or left out (the automatic limit).
	"Config.memory": func(sv reflect.Value) any {
		m := sv.Interface().(Config).Memory
		switch {
		case m == nil:
			return nil
		case m.Off:
			return MemoryOff
		}
		return engine.BlockValue{B: memoryBlock, V: reflect.ValueOf(*m)}
	},
	"Log.access": func(sv reflect.Value) any {
		l := sv.Interface().(Log)
		if !l.Access {
			return false
		}
		return engine.BlockValue{B: accessLogBlock, V: reflect.ValueOf(l.AccessLog)}
	},
	// default, min and max are kept as written; "" is unset.
	// A parameter's type is its name.
	"Param.type":    func(sv reflect.Value) any { return sv.Interface().(dataquery.Param).Type.String() },
	"Param.default": func(sv reflect.Value) any { return optString(sv.Interface().(dataquery.Param).Default) },
	"Param.min":     func(sv reflect.Value) any { return optString(sv.Interface().(dataquery.Param).Min) },
	"Param.max":     func(sv reflect.Value) any { return optString(sv.Interface().(dataquery.Param).Max) },
}

// optString is s, or nil (left out) when empty.
func optString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// mapOrders names the Config lists that keep a map's entries in the
// file's order, by the map's Go type.
var mapOrders = map[reflect.Type]string{
	reflect.TypeFor[map[string]*Upstream]():        "UpstreamOrder",
	reflect.TypeFor[map[string]*DataSource]():      "DataSourceOrder",
	reflect.TypeFor[map[string]*dataquery.Param](): "ParamOrder",
}
