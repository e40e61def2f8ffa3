package clusterstore

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/apps"
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
