package admin

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"
)

// TestClusterView: GET /api/v1/cluster answers the view in the issue's
// shape (nodes an empty list, not null, when there are none).
func TestClusterView(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	views := []ClusterView{
		{Redis: StoreState{Error: "not configured"}, Etcd: StoreState{Error: "not configured"}},
		{Nodes: []ClusterNode{{ID: "node-a", Version: "1.2", Admin: "127.0.0.1:9901", Since: since}}, Redis: StoreState{Up: true}, Etcd: StoreState{Up: true}},
	}
	want := []string{
		`{"nodes":[],"redis":{"up":false,"error":"not configured"},"etcd":{"up":false,"error":"not configured"}}`,
		`{"nodes":[{"id":"node-a","version":"1.2","admin":"127.0.0.1:9901","since":"2026-01-02T03:04:05Z"}],"redis":{"up":true,"error":""},"etcd":{"up":true,"error":""}}`,
	}
	for i, v := range views {
		o := fullOptions(t, nil, nil)
		o.Cluster = func(context.Context) ClusterView { return v }
		mux, err := newMux(o)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mux)
		r := call(t, srv, "GET", "/api/v1/cluster", "")
		srv.Close()
		expect(t, r, 200, "")
		var got, exp any
		if err := json.Unmarshal([]byte(r.raw), &got); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(want[i]), &exp)
		gb, _ := json.Marshal(got)
		eb, _ := json.Marshal(exp)
		if string(gb) != string(eb) {
			t.Errorf("view %d: %s, want %s", i, gb, eb)
		}
	}
}
