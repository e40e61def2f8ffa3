package dataquery

import (
	"errors"
	"strconv"
)

// Identity-bound values (`from:`): a data route's parameter, or a
// table-mode row filter, whose value the client cannot send. It is filled
// from the caller's verified identity instead: the app's id, the JWT's
// subject, or one of its claims. The value is then bound like a client's
// (a bind argument, checked against its kind and bounds), never spliced
// into the SQL.

// FromKind is where a bound value comes from.
type FromKind uint8

// The identity sources.
const (
	// FromNone: the value is the client's (a query parameter).
	FromNone FromKind = iota
	// FromApp ("app.id"): the authenticated app's id (auth api_key, hmac
	// or jwt).
	FromApp
	// FromSubject ("subject"): the JWT's sub (auth jwt).
	FromSubject
	// FromClaim ("claim.<name>"): one claim of the JWT, a string or a
	// number (auth jwt).
	FromClaim
)

// From is a parsed `from:`.
type From struct {
	Kind FromKind
	// Claim is the claim's name (FromClaim only).
	Claim string
}

// MaxClaimName bounds a claim name in `from: claim.<name>`.
const MaxClaimName = 128

// The ways a `from:` is written.
const (
	fromApp         = "app.id"
	fromSubject     = "subject"
	fromClaimPrefix = "claim."
)

// ParseFrom reads a `from:`: "app.id", "subject" or "claim.<name>", the
// name 1 to MaxClaimName printable ASCII bytes other than space (claim
// names such as "https://example.com/tenant" are common).
func ParseFrom(s string) (From, error) {
	switch s {
	case fromApp:
		return From{Kind: FromApp}, nil
	case fromSubject:
		return From{Kind: FromSubject}, nil
	}
	if len(s) <= len(fromClaimPrefix) || s[:len(fromClaimPrefix)] != fromClaimPrefix {
		return From{}, errors.New(`want app.id, subject or claim.<name>, got ` + quote(s))
	}
	name := s[len(fromClaimPrefix):]
	if len(name) > MaxClaimName {
		return From{}, errors.New("claim name longer than " + strconv.Itoa(MaxClaimName) + " bytes")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f {
			return From{}, errors.New("claim name " + quote(name) + ": printable ASCII without spaces only")
		}
	}
	return From{Kind: FromClaim, Claim: name}, nil
}

// String is the `from:` as written.
func (f From) String() string {
	switch f.Kind {
	case FromApp:
		return fromApp
	case FromSubject:
		return fromSubject
	case FromClaim:
		return fromClaimPrefix + f.Claim
	}
	return ""
}

// NeedsJWT reports whether the source is only given by a JWT (subject,
// claims); app.id is given by every app-authenticating scheme.
func (f From) NeedsJWT() bool { return f.Kind == FromSubject || f.Kind == FromClaim }

// Value returns the value f names in a caller's identity (its app's id,
// its subject, the claims kept from its token: a string or a number as its
// JSON text); ok is false when there is none (an empty app or subject, a
// claim absent or of another type).
func (f From) Value(app, subject string, claims map[string]string) (string, bool) {
	var v string
	switch f.Kind {
	case FromApp:
		v = app
	case FromSubject:
		v = subject
	case FromClaim:
		v = claims[f.Claim]
	}
	return v, v != ""
}
