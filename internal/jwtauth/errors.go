package jwtauth

// Detail is the stable reason a token is refused, sent as the refusal's
// `detail`. The set is fixed and small on purpose: a bad algorithm, a
// forbidden header, an unknown key and a wrong signature are all
// DetailInvalidToken, so a caller learns nothing about which check failed.
type Detail string

const (
	// DetailMissing: no `Authorization: Bearer` token.
	DetailMissing Detail = "missing_token"
	// DetailTooLarge: the token is over max_token_bytes (checked before
	// any parsing).
	DetailTooLarge Detail = "token_too_large"
	// DetailMalformed: not a compact JWS of three base64url parts with a
	// JSON header.
	DetailMalformed Detail = "malformed_token"
	// DetailInvalid: the algorithm, a header parameter, the key or the
	// signature is not acceptable.
	DetailInvalid Detail = "invalid_token"
	// DetailExpired: exp (plus the clock skew) has passed, or is missing.
	DetailExpired Detail = "token_expired"
	// DetailNotYetValid: nbf or iat is later than now plus the skew.
	DetailNotYetValid Detail = "token_not_yet_valid"
	// DetailWrongIssuer: iss is not the issuer's.
	DetailWrongIssuer Detail = "wrong_issuer"
	// DetailWrongAudience: no aud entry among the issuer's audiences.
	DetailWrongAudience Detail = "wrong_audience"
	// DetailNoApp: the app claim is missing or not a string.
	DetailNoApp Detail = "no_app_claim"
	// DetailKeyUnavailable: the issuer has no key set at all yet (never
	// fetched, none in state_dir), or the token's kid is not in the set
	// and the fetch it started did not end within the wait
	// (KeySetOptions.FetchWait, 1 s by default): the fetch goes on in the
	// background and a retry may succeed.
	DetailKeyUnavailable Detail = "key_unavailable"
)

// Error is a refused token.
type Error struct{ Detail Detail }

func (e *Error) Error() string { return "jwt: " + string(e.Detail) }

// Preallocated so a refusal costs no allocation.
var (
	errMissing        = &Error{DetailMissing}
	errTooLarge       = &Error{DetailTooLarge}
	errMalformed      = &Error{DetailMalformed}
	errInvalid        = &Error{DetailInvalid}
	errExpired        = &Error{DetailExpired}
	errNotYetValid    = &Error{DetailNotYetValid}
	errWrongIssuer    = &Error{DetailWrongIssuer}
	errWrongAudience  = &Error{DetailWrongAudience}
	errNoApp          = &Error{DetailNoApp}
	errKeyUnavailable = &Error{DetailKeyUnavailable}
)
