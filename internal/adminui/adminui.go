// Package adminui is the admin web UI: one page of hand-written HTML, CSS
// and JavaScript, embedded in the binary (go:embed), that reads and acts
// through the admin API with the operator's bearer token. The files hold
// no data and no secret, so the admin listener serves them without a
// token; every figure the page shows comes from an authenticated API call.
// Nothing is downloaded from elsewhere and nothing is built: the files in
// assets/ are what the browser runs.
package adminui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the UI is served under on the admin listener.
const Prefix = "/ui/"

// Handler serves the UI's files under Prefix. The Content-Security-Policy
// lets the page load only its own files and call only its own origin, so
// that even a value the page failed to escape could not run a script or
// send data elsewhere.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("adminui: the embedded assets directory is missing: " + err.Error()) // fixed at build time
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// no-cache: revalidated on each load, so an upgraded levee serves
		// its own page, never a cached older one.
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
