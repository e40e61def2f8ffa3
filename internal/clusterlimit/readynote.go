package clusterlimit

import "fmt"

// ReadyNote is /readyz's note while Redis does not answer (ready, but
// degraded: what each limited request gets meanwhile); "" while it does.
func (l *Limiter) ReadyNote() string {
	if l.Up() {
		return ""
	}
	what := "each node enforces its limits divided by the " + fmt.Sprint(l.Nodes()) + " live node(s) last counted"
	switch l.OnFailure() {
	case Allow:
		what = "limited requests are admitted without limits (on_failure: allow)"
	case Deny:
		what = "limited requests are refused (on_failure: deny)"
	}
	return "cluster.redis unreachable (" + l.LastError() + "): " + what + "; HMAC replays are checked on this node only"
}
