package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/levee-gw/levee/internal/dataapis"
	"github.com/prometheus/client_golang/prometheus"
)

// TestDuplicateKey: the key's path at any depth, case folded as
// encoding/json folds when asked, and nothing for JSON without one.
func TestDuplicateKey(t *testing.T) {
	const none = "-"
	for _, c := range []struct {
		in         string
		exact, fld string // none: no duplicate
	}{
		{`{"id":"a","id":"b"}`, "id", "id"},
		{`{"id":"a","ID":"b"}`, none, "ID"},
		{`{"id":"a","ſd":"b"}`, none, none},   // ſ folds to s, not i
		{`{"kind":1,"Kind":2}`, none, "Kind"}, // K, the Kelvin sign, folds to k
		{`{"limits":{"rate":1,"burst":2,"rate":3}}`, "limits.rate", "limits.rate"},
		{`{"route_limits":{"a":{"rate":1},"b":{"rate":1,"rate":2}}}`, "route_limits.b.rate", "route_limits.b.rate"},
		{`{"grants":["a","a"],"x":[{"k":1},{"k":1,"k":2}]}`, "x[1].k", "x[1].k"},
		{`[{"a":1},{"a":1}]`, none, none},
		{`{"a":{"a":{"a":1}},"b":{"a":2}}`, none, none},
		{`{"a":[[],[{}],{"b":[1,{"c":1,"c":1}]}]}`, "a[2].b[1].c", "a[2].b[1].c"},
		{`{"params":{"Id":{},"id":{}}}`, none, "params.id"},
		{`{"":1,"":2}`, "", ""},
		{`{"a":1,"a"`, "a", "a"}, // found before the decoder reaches the cut
		{`{"a":1 "a":2}`, none, none},
		{`not json`, none, none},
		{`{}`, none, none},
	} {
		show := func(path string, dup bool) string {
			if !dup {
				return none
			}
			return path
		}
		exact, fld := show(duplicateKey([]byte(c.in), false)), show(duplicateKey([]byte(c.in), true))
		if exact != c.exact || fld != c.fld {
			t.Errorf("%s: exact %q fold %q, want %q %q", c.in, exact, fld, c.exact, c.fld)
		}
	}
}

// FuzzDuplicateKey holds duplicateKey to an oracle that shares none of
// its code: in valid JSON, the members written (the colons outside
// strings) outnumber the members encoding/json keeps exactly when some
// object holds a key twice. Folding finds at least what exact matching
// finds.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"id":"a","id":"b"}`, `{"a":{"b":1,"c":[{"d":1,"d":2}]}}`, `[1,"x",{"a":null}]`,
		`{"id":"a","ID":"b"}`, `{"a:b":"c:d","e\"":1}`, `{"\u0061":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		exact, dup := duplicateKey(data, false)
		if _, fdup := duplicateKey(data, true); dup && !fdup {
			t.Fatalf("exact found %q, fold nothing: %q", exact, data)
		}
		if !json.Valid(data) {
			return
		}
		// UseNumber: valid JSON may hold a number no float64 holds
		// (1e400); the oracle counts members, not values.
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		written, kept := colonsOutsideStrings(data), members(v)
		if (written != kept) != dup {
			t.Fatalf("written %d members, kept %d, duplicateKey %q %v: %q", written, kept, exact, dup, data)
		}
	})
}

// colonsOutsideStrings counts the members written in valid JSON.
func colonsOutsideStrings(data []byte) int {
	n, in, esc := 0, false, false
	for _, c := range data {
		switch {
		case in && esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && c == ':':
			n++
		}
	}
	return n
}

// members counts the members of every object in v.
func members(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		n += len(x)
		for _, e := range x {
			n += members(e)
		}
	case []any:
		for _, e := range x {
			n += members(e)
		}
	}
	return n
}

// TestDuplicateKeysRefused: the apps API (create, patch, nested, case
// folded) and the data-API API (create, new version, publish) answer 400
// duplicate_key naming the key, and nothing is created.
func TestDuplicateKeysRefused(t *testing.T) {
	srv, store := server(t, nil)
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", "/api/v1/apps", `{"id":"a","id":"b"}`, "id"},
		{"POST", "/api/v1/apps", `{"id":"a","ID":"b"}`, "ID"},
		{"POST", "/api/v1/apps", `{"id":"a","limits":{"rate":1,"rate":1000}}`, "limits.rate"},
		{"POST", "/api/v1/apps", `{"id":"a","route_limits":{"r":{"burst":1,"burst":2}}}`, "route_limits.r.burst"},
	} {
		r := call(t, srv, c.method, c.path, c.body)
		expect(t, r, 400, "duplicate_key")
		if r.body["field"] != c.field {
			t.Errorf("%s: field %v, want %s", c.body, r.body["field"], c.field)
		}
	}
	if page, err := store.List(context.Background(), "", 10); err != nil || len(page.Apps) != 0 {
		t.Fatalf("apps after refused creates: %+v %v", page.Apps, err)
	}
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":"a"}`), 201, "")
	r := call(t, srv, "PATCH", "/api/v1/apps/a", `{"status":"suspended","status":"active"}`)
	expect(t, r, 400, "duplicate_key")
	if got := call(t, srv, "GET", "/api/v1/apps/a", ""); got.body["status"] != "active" {
		t.Errorf("the refused patch changed the app: %s", got.raw)
	}

	dstore, err := dataapis.Open(context.Background(), dataapis.Options{Path: filepath.Join(t.TempDir(), "data-apis.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dstore.Close() })
	h, err := NewHandler(Options{Gateway: fakeGateway{}, Gatherer: prometheus.NewRegistry(), DataAPIs: dstore})
	if err != nil {
		t.Fatal(err)
	}
	dsrv := httptest.NewServer(h)
	defer dsrv.Close()
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", "/api/v1/data-apis", `{"name":"a","name":"b"}`, "name"},
		{"POST", "/api/v1/data-apis", `{"name":"a","data":{"source":"db","sql":"SELECT 1","sql":"COPY x TO PROGRAM 'id'"}}`, "data.sql"},
		{"POST", "/api/v1/data-apis/a/versions", `{"match":{"path_prefix":"/a","path_prefix":"/b"}}`, "match.path_prefix"},
		{"POST", "/api/v1/data-apis/a/publish", `{"version":1,"version":2}`, "version"},
	} {
		r := call(t, dsrv, c.method, c.path, c.body)
		expect(t, r, 400, "duplicate_key")
		if r.body["field"] != c.field {
			t.Errorf("%s: field %v, want %s", c.body, r.body["field"], c.field)
		}
	}
	if page, err := dstore.List(context.Background(), "", 10); err != nil || len(page.APIs) != 0 {
		t.Errorf("data APIs after refused creates: %+v %v", page, err)
	}
}
