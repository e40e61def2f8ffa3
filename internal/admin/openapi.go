package admin

import (
	"context"
	"errors"
	"net/http"
)

// APIDocs is what GET /api/v1/openapi.json reads: the OpenAPI document of
// the routes serving now. The gateway implements it.
type APIDocs interface {
	// OpenAPI returns the document as JSON. It returns within a short
	// deadline whatever the data sources do (a source that does not
	// answer leaves its routes' columns unknown, the document still
	// served). An error is a document that could not be made: 500, or
	// 503 when it is ctx's deadline.
	OpenAPI(ctx context.Context) ([]byte, error)
}

// openAPIRoute registers GET /api/v1/openapi.json (a read: scope read is
// enough) on mux.
func openAPIRoute(mux *adminMux, docs APIDocs) {
	mux.HandleFunc("GET /api/v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		doc, err := docs.OpenAPI(r.Context())
		switch {
		case err == nil:
			writeRaw(w, doc)
		case errors.Is(err, context.DeadlineExceeded):
			writeError(w, http.StatusServiceUnavailable, "timeout", "the OpenAPI document was not ready in time: "+err.Error())
		default:
			writeError(w, http.StatusInternalServerError, "internal", "the OpenAPI document could not be made: "+err.Error())
		}
	})
}
