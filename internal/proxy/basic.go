package proxy

// Basic auth on the request path (auth: basic): the user is an app's id,
// the password one of its active passwords (package auth's BasicGuard
// bounds the cost). Failures are counted per client address (the real
// one, clientaddr.go); an address over the limit is refused 429
// auth_failures before its credentials are even parsed.

import (
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/levee-gw/levee/internal/auth"
)

// basicChallenge is the WWW-Authenticate of a 401 on an auth: basic route.
var basicChallenge = []string{`Basic realm="levee", charset="UTF-8"`}

// basicGuardOptions: the argon2 runs at once take at most half the CPUs
// (at least one), so a flood of new passwords leaves the rest to the
// proxy; the other bounds are auth's defaults (a 10,000-entry success
// cache for 5 minutes, 10 failures per address per minute, 65,536
// addresses tracked).
func basicGuardOptions() auth.BasicOptions {
	return auth.BasicOptions{Concurrency: max(1, runtime.GOMAXPROCS(0)/2)}
}

// identifyBasic authenticates r's basic credentials. A request without
// credentials is not counted as a failure (a browser asks first without
// them, to get the challenge); every other failure is.
func (h *Handler) identifyBasic(r *http.Request, x *exchange, apps *Apps, now time.Time) (*App, Reason, string) {
	g := h.consumers.basic
	addr, _ := clientAddr(x.client) // the zero Addr (one bucket) for a client that is not an IP
	if _, blocked := g.Blocked(addr, now); blocked {
		return nil, ReasonAuthFailures, ""
	}
	user, password, err := auth.ParseBasic(r.Header)
	if err != nil {
		if detail := authDetail(err); detail != string(auth.ReasonMissingCredentials) {
			g.Failed(addr, now)
			return nil, ReasonUnauthenticated, detail
		}
		return nil, ReasonUnauthenticated, string(auth.ReasonMissingCredentials)
	}
	app := apps.App(user)
	var stored []auth.StoredPassword
	if app != nil {
		stored = app.Passwords
	}
	if _, err := g.Verify(r.Context(), user, password, stored, now); err != nil {
		g.Failed(addr, now)
		return nil, ReasonUnauthenticated, string(auth.ReasonBadPassword)
	}
	return app, "", ""
}

// setBasicRetryAfter sets Retry-After to the end of the client's failure
// window (at least 1 s).
func setBasicRetryAfter(w http.ResponseWriter, g *auth.BasicGuard, client string, now time.Time) {
	addr, _ := clientAddr(client)
	until, _ := g.Blocked(addr, now)
	secs := max(1, int64((until.Sub(now)+time.Second-1)/time.Second))
	w.Header()["Retry-After"] = []string{strconv.FormatInt(secs, 10)}
}
