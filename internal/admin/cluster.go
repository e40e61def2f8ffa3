package admin

import (
	"context"
	"net/http"
	"time"
)

// ClusterView is GET /api/v1/cluster: the live nodes and the shared
// stores' state (docs/cluster.md).
type ClusterView struct {
	// Nodes are the live nodes in id order, from etcd's membership
	// (cluster.etcd); empty without it.
	Nodes []ClusterNode `json:"nodes"`
	Redis StoreState    `json:"redis"`
	Etcd  StoreState    `json:"etcd"`
}

// ClusterNode is one live node.
type ClusterNode struct {
	ID      string    `json:"id"`
	Version string    `json:"version"`
	Admin   string    `json:"admin"`
	Since   time.Time `json:"since"`
}

// StoreState says whether a shared store answers, and its last error. A
// store not configured is down with the error "not configured".
type StoreState struct {
	Up    bool   `json:"up"`
	Error string `json:"error"`
}

// clusterRoutes registers GET /api/v1/cluster (read scope).
func clusterRoutes(mux *adminMux, cluster func(ctx context.Context) ClusterView) {
	mux.HandleFunc("GET /api/v1/cluster", func(w http.ResponseWriter, r *http.Request) {
		v := cluster(r.Context())
		if v.Nodes == nil {
			v.Nodes = []ClusterNode{}
		}
		writeJSON(w, http.StatusOK, v)
	})
}
