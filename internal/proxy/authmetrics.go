package proxy

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Auth metrics: every request on a route with auth is counted once by
// its scheme and result when levee has decided who the caller is, and a
// refusal once more by its stable detail. Counted on the request path in
// fixed arrays of atomics (no allocation), read at scrape time.
var (
	authRequestsDesc = prometheus.NewDesc("levee_auth_requests_total",
		"Requests on routes with auth, by scheme (api_key, hmac, jwt, basic, forward, client_cert) and result: accepted (credentials verified, app active and granted), unauthenticated (401) or forbidden (403).",
		[]string{"scheme", "result"}, nil)
	authFailuresDesc = prometheus.NewDesc("levee_auth_failures_total",
		"Refused credentials by scheme and reason: the stable detail of the 401 or 403 (docs/authentication.md), \"other\" for none of them. A series appears with its first count.",
		[]string{"scheme", "reason"}, nil)
)

// authSchemes are the scheme labels by AuthMode (AuthNone is not counted).
var authSchemes = [...]string{AuthAPIKey: "api_key", AuthHMAC: "hmac", AuthJWT: "jwt", AuthForward: "forward", AuthBasic: "basic", AuthClientCert: "client_cert"}

const (
	authAccepted = iota
	authUnauthenticated
	authForbidden
	authResultCount
)

var authResults = [authResultCount]string{"accepted", "unauthenticated", "forbidden"}

// authReasons are the stable details of auth refusals (package auth's
// reasons, package jwtauth's details, and identify's 403 details); the
// last, "other", takes any detail not listed.
var authReasons = [...]string{
	"missing_credentials", "malformed_credentials", "unknown_key", "bad_signature", "stale_date", "replayed",
	"missing_token", "token_too_large", "malformed_token", "invalid_token", "token_expired", "token_not_yet_valid",
	"wrong_issuer", "wrong_audience", "no_app_claim", "key_unavailable",
	"suspended", "no_grant", "no_scope", "unknown_app", "bad_password",
	"denied",
	"client_cert_missing", "client_cert_unknown", "client_cert_ambiguous",
	"other",
}

type authCounters struct {
	results [len(authSchemes)][authResultCount]atomic.Uint64
	reasons [len(authSchemes)][len(authReasons)]atomic.Uint64
}

// authReasonIndex is detail's index in authReasons (a scan of about twenty
// short strings; no allocation).
func authReasonIndex(detail string) int {
	for i, r := range authReasons[:len(authReasons)-1] {
		if r == detail {
			return i
		}
	}
	return len(authReasons) - 1
}

// accepted counts a request whose caller was identified.
func (c *authCounters) accepted(mode AuthMode) {
	if int(mode) < len(authSchemes) && mode != AuthNone {
		c.results[mode][authAccepted].Add(1)
	}
}

// refused counts a refusal with reason (unauthenticated or forbidden)
// and detail; other reasons (memory pressure, a body too large) are not
// an auth result and are not counted.
func (c *authCounters) refused(mode AuthMode, reason Reason, detail string) {
	if int(mode) >= len(authSchemes) || mode == AuthNone {
		return
	}
	switch reason {
	case ReasonUnauthenticated:
		c.results[mode][authUnauthenticated].Add(1)
	case ReasonForbidden:
		c.results[mode][authForbidden].Add(1)
	default:
		return
	}
	c.reasons[mode][authReasonIndex(detail)].Add(1)
}

func (c *authCounters) collect(ch chan<- prometheus.Metric) {
	for m := AuthAPIKey; int(m) < len(authSchemes); m++ {
		for r, label := range authResults {
			ch <- prometheus.MustNewConstMetric(authRequestsDesc, prometheus.CounterValue, float64(c.results[m][r].Load()), authSchemes[m], label)
		}
		for i, label := range authReasons {
			if v := c.reasons[m][i].Load(); v > 0 {
				ch <- prometheus.MustNewConstMetric(authFailuresDesc, prometheus.CounterValue, float64(v), authSchemes[m], label)
			}
		}
	}
}
