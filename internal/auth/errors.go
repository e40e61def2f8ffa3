package auth

// Reason is a stable, snake_case code for why a request is not
// authenticated. The proxy answers every Reason with 401 and the JSON body
// {"error": ..., "reason": "unauthenticated"} carrying the Reason as detail.
type Reason string

// The reasons a request is not authenticated.
const (
	// ReasonMissingCredentials: no API key and no signature.
	ReasonMissingCredentials Reason = "missing_credentials"
	// ReasonMalformedCredentials: credentials present but unreadable (bad
	// syntax, several values, an unsupported scheme, no or bad Date on a
	// signed request).
	ReasonMalformedCredentials Reason = "malformed_credentials"
	// ReasonUnknownKey: a well-formed API key or key ID that no app holds.
	ReasonUnknownKey Reason = "unknown_key"
	// ReasonBadSignature: the signature does not match the request.
	ReasonBadSignature Reason = "bad_signature"
	// ReasonStaleDate: the signed Date is outside the skew window.
	ReasonStaleDate Reason = "stale_date"
	// ReasonReplayed: this exact signature was already accepted.
	ReasonReplayed Reason = "replayed"
)

// Error is the error every failed authentication returns: a Reason and a
// detail for logs (never the key or the secret). Match a reason with
// errors.Is(err, auth.ErrUnknownKey) and friends, or errors.As for both.
type Error struct {
	Reason Reason
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return "auth: " + string(e.Reason)
	}
	return "auth: " + string(e.Reason) + ": " + e.Detail
}

// Is reports whether target is the sentinel for e's Reason.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Detail == "" && t.Reason == e.Reason
}

// Sentinels, one per Reason, for errors.Is.
var (
	ErrMissingCredentials   = &Error{Reason: ReasonMissingCredentials}
	ErrMalformedCredentials = &Error{Reason: ReasonMalformedCredentials}
	ErrUnknownKey           = &Error{Reason: ReasonUnknownKey}
	ErrBadSignature         = &Error{Reason: ReasonBadSignature}
	ErrStaleDate            = &Error{Reason: ReasonStaleDate}
	ErrReplayed             = &Error{Reason: ReasonReplayed}
)

func fail(r Reason, detail string) error { return &Error{Reason: r, Detail: detail} }
