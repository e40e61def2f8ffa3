package proxy

import (
	"net/http"
	"strings"

	"github.com/levee-gw/levee/internal/grpcweb"
)

// Step 3e: gRPC-Web to gRPC (package grpcweb), for routes whose upstream
// speaks HTTP/2. The request goes on as application/grpc (a -text body
// base64-decoded as it streams, within the route's body limit, which
// counts the text as sent); the answer comes back as gRPC-Web, each
// message flushed as it arrives (gRPC answers have no length), the
// upstream's trailers in the trailer frame at the end of the body.
// Refusals from here on (JSON) pass through unchanged.

// isGRPCWeb reports whether r's Content-Type is a gRPC-Web one. No
// allocation.
func isGRPCWeb(r *http.Request) bool {
	ct := r.Header["Content-Type"]
	return len(ct) == 1 && strings.HasPrefix(ct[0], "application/grpc-web")
}

// serveGRPCWeb serves r through the rest of the request path with the
// gRPC-Web translation around it. The trailer frame is written only when
// the path returned: an aborted answer (panic) stays aborted.
func (h *Handler) serveGRPCWeb(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route) {
	web := grpcweb.Start(w, r)
	if web == nil { // a content type that only looks like gRPC-Web
		h.serveUpstream(w, r, x, rt)
		return
	}
	h.serveUpstream(web, r, x, rt)
	_ = web.Finish() // a client gone is the client's loss; the access log has the status
}
