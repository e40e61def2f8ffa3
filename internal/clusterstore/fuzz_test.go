package clusterstore

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/dataapis"
)

// FuzzDecodeRecord: any value under <prefix>state/apps/ is either refused
// or a record whose snapshot builds and that encodes back to a value
// decodeRecord accepts.
func FuzzDecodeRecord(f *testing.F) {
	st := apps.NewState()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := st.Create(apps.Spec{ID: "shop", Grants: []string{"api", "web"}, Limits: apps.Limits{Rate: 5}}, now); err != nil {
		f.Fatal(err)
	}
	nk, _ := apps.NewAPIKey(now)
	_ = st.AddKey("shop", nk, now)
	b, _ := json.Marshal(st.Apps["shop"])
	f.Add("shop", b)
	np, _ := apps.MakePassword("a-chosen-password", now)
	_ = st.AddPassword("shop", np, now)
	c, _ := apps.NewCertificate(apps.CertificateSpec{SANURI: "spiffe://example.org/shop"}, now)
	_ = st.AddCertificate("shop", c, now)
	b, _ = json.Marshal(st.Apps["shop"])
	f.Add("shop", b)
	f.Add("shop", []byte(`{"app":{"id":"shop"}}`))
	f.Add("x", []byte(`{"app":{"id":"x","name":"x","status":"active","source":"api"},"keys":[{"id":"000000000000","sha256":"`+
		"0000000000000000000000000000000000000000000000000000000000000000"+`","source":"api","created":"2026-01-01T00:00:00Z"}]}`))
	f.Fuzz(func(t *testing.T, id string, value []byte) {
		r, err := decodeRecord(id, value)
		if err != nil {
			return
		}
		st := apps.NewState()
		st.Apps[id] = r
		if _, err := st.Snapshot(); err != nil {
			t.Fatalf("accepted record %q does not build a snapshot: %v", value, err)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeRecord(id, again); err != nil {
			t.Fatalf("re-encoded record refused: %v\n%s", err, again)
		}
	})
}

// FuzzPushValue: a key under <prefix>endpoints/ and a confirmation's value
// are either refused or read as levee writes them: an upstream without
// "/" and a positive revision that formats back to the same bytes.
func FuzzPushValue(f *testing.F) {
	f.Add("up1", []byte("42"))
	f.Add("up1/confirmed", []byte("9223372036854775807"))
	f.Add("a/b/confirmed", []byte("0"))
	f.Add("/confirmed", []byte("-1"))
	f.Add("up", []byte("99999999999999999999"))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		if up, confirm, ok := parsePushKey(key); ok {
			if up == "" || strings.Contains(up, "/") {
				t.Fatalf("key %q read as upstream %q", key, up)
			}
			again := up
			if confirm {
				again += confirmSuffix
			}
			if again != key {
				t.Fatalf("key %q read as %q (confirm %v)", key, up, confirm)
			}
		}
		rev, err := decodeConfirm(value)
		if err != nil {
			return
		}
		if rev <= 0 || strconv.FormatInt(rev, 10) != string(value) {
			t.Fatalf("value %q read as revision %d", value, rev)
		}
	})
}

// FuzzDecodeEntry: any value under <prefix>dataapis/apis/ is either
// refused or an entry within the store's bounds whose snapshot builds
// (serving its published version when published) and that encodes back
// to a value decodeEntry accepts.
func FuzzDecodeEntry(f *testing.F) {
	m := dataapis.NewModel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	def := []byte(`{"data":{"sql":"SELECT 1 AS n","source":"db"},"match":{"path_prefix":"/n"}}`)
	if _, err := m.Create("orders", def, now); err != nil {
		f.Fatal(err)
	}
	_, _ = m.Transition("orders", 1, false, now)
	b, _ := dataapis.EncodeEntry(m.APIs["orders"])
	f.Add("orders", b)
	f.Add("orders", []byte(`{"name":"orders","state":"published","published_version":2,"versions":[{"version":1,"definition":{}}]}`))
	f.Add("x", []byte(`{"name":"x","state":"draft","versions":[{"version":2,"definition":{"a":1}},{"version":1,"definition":{}}]}`))
	f.Fuzz(func(t *testing.T, name string, value []byte) {
		e, err := decodeEntry(name, value)
		if err != nil {
			return
		}
		m := dataapis.NewModel()
		m.APIs[name] = e
		snap := m.Snapshot()
		if e.State == dataapis.Published && (len(snap.Serving) != 1 || snap.Serving[0].Version != e.Published) {
			t.Fatalf("accepted published entry serves %v", snap.Serving)
		}
		again, err := dataapis.EncodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeEntry(name, again); err != nil {
			t.Fatalf("re-encoded entry refused: %v\n%s", err, again)
		}
	})
}
