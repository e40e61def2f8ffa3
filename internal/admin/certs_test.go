package admin

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/statedb"
	"github.com/prometheus/client_golang/prometheus"
)

// keysOnly is an AppStore without certificate mappings or passwords.
type keysOnly struct{ AppStore }

// TestCertificateRoutes: a mapping is added (canonical, Location), listed
// with the app and alone, refused when malformed (400 unknown field, 422
// bad value naming the kind) or taken (409), deleted (404 the second
// time); a store without mappings answers 501 not_supported.
func TestCertificateRoutes(t *testing.T) {
	srv, _ := server(t, nil)
	if r := call(t, srv, "POST", "/api/v1/apps", `{"id":"a"}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	r := call(t, srv, "POST", "/api/v1/apps/a/certificates", `{"san_uri":"SPIFFE://Example.org/w"}`)
	id, _ := r.body["id"].(string)
	if r.status != 201 || r.body["san_uri"] != "spiffe://example.org/w" || r.header.Get("Location") != "/api/v1/apps/a/certificates/"+id {
		t.Fatalf("add: %d %s %v", r.status, r.raw, r.header)
	}
	for body, want := range map[string]int{
		`{"san_uri":"spiffe://example.org/w"}`: 409,
		`{"san_dns":"a..b"}`:                   422,
		`{"subject":"CN=a"}`:                   400,
		`{"san_dns":"a.b","san_uri":"x://y"}`:  422,
	} {
		if r := call(t, srv, "POST", "/api/v1/apps/a/certificates", body); r.status != want {
			t.Errorf("POST %s: %d %s, want %d", body, r.status, r.raw, want)
		}
	}
	if r := call(t, srv, "POST", "/api/v1/apps/a/certificates", `{"san_dns":"a..b"}`); r.body["field"] != "san_dns" {
		t.Errorf("422 names field %v", r.body["field"])
	}
	if r := call(t, srv, "GET", "/api/v1/apps/a/certificates", ""); r.status != 200 || len(r.body["certificates"].([]any)) != 1 {
		t.Errorf("list: %d %s", r.status, r.raw)
	}
	if r := call(t, srv, "GET", "/api/v1/apps/a", ""); len(r.body["certificates"].([]any)) != 1 {
		t.Errorf("the app's certificates: %s", r.raw)
	}
	if r := call(t, srv, "DELETE", "/api/v1/apps/a/certificates/"+id, ""); r.status != 200 || r.body["id"] != id {
		t.Errorf("delete: %d %s", r.status, r.raw)
	}
	if r := call(t, srv, "DELETE", "/api/v1/apps/a/certificates/"+id, ""); r.status != 404 {
		t.Errorf("delete twice: %d", r.status)
	}

	store, err := apps.Open(context.Background(), apps.Options{Config: statedb.Config{Path: filepath.Join(t.TempDir(), "apps.db")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h, err := NewHandler(Options{Gateway: fakeGateway{}, Gatherer: prometheus.NewRegistry(), Apps: keysOnly{store}})
	if err != nil {
		t.Fatal(err)
	}
	bare := httptest.NewServer(h)
	t.Cleanup(bare.Close)
	if r := call(t, bare, "POST", "/api/v1/apps/a/certificates", `{"san_dns":"a.b"}`); r.status != 501 || r.body["reason"] != "not_supported" {
		t.Errorf("a store without mappings: %d %s", r.status, r.raw)
	}
}
