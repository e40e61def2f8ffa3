package admin

import (
	"net/http"

	"github.com/levee-gw/levee/internal/apps"
)

// certificateRoutes registers the client-certificate mapping routes of
// an app (auth: client_cert, docs/authentication.md): a mapping is added
// with exactly one of {"fingerprint_sha256"}, {"san_dns"} and {"san_uri"},
// listed, and deleted (it stops admitting at once). A store without
// mappings answers 501.
func certificateRoutes(mux *adminMux, store AppStore) {
	cb, _ := store.(apps.CertificateBackend)
	mux.HandleFunc("POST /api/v1/apps/{id}/certificates", func(w http.ResponseWriter, r *http.Request) {
		var spec apps.CertificateSpec
		if !decodeStrict(w, r, &spec) {
			return
		}
		if cb == nil {
			writeStoreError(w, apps.ErrUnsupported)
			return
		}
		c, err := cb.AddCertificate(r.Context(), r.PathValue("id"), spec)
		if err != nil {
			writeStoreError(w, err)
			return
		}
		w.Header().Set("Location", "/api/v1/apps/"+r.PathValue("id")+"/certificates/"+c.ID)
		writeJSON(w, http.StatusCreated, c)
	})
	mux.HandleFunc("GET /api/v1/apps/{id}/certificates", func(w http.ResponseWriter, r *http.Request) {
		a, err := store.Get(r.Context(), r.PathValue("id"))
		if err != nil {
			writeStoreError(w, err)
			return
		}
		cs := a.Certificates
		if cs == nil {
			cs = []apps.Certificate{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"app": a.ID, "certificates": cs})
	})
	mux.HandleFunc("DELETE /api/v1/apps/{id}/certificates/{certid}", func(w http.ResponseWriter, r *http.Request) {
		if cb == nil {
			writeStoreError(w, apps.ErrUnsupported)
			return
		}
		c, err := cb.DeleteCertificate(r.Context(), r.PathValue("id"), r.PathValue("certid"))
		if err != nil {
			writeStoreError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, c)
	})
}
