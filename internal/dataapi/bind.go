package dataapi

import (
	"errors"
	"net/url"
	"strconv"

	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/upstream"
)

// Identity-bound values: a SQL-mode parameter or a table-mode row filter
// declared with `from:` takes its value from the request's verified
// identity (the app's id, the JWT's subject or one of its claims), never
// from the client. A client that sends one, as a parameter or in any
// filter form (an or=/and= group refuses a row filter column too, see
// dataquery), is refused 400 unknown_parameter naming it: to the client
// the parameter does not exist. The value is then put in the query values
// under its name, so dataquery binds it like any other: a bind argument,
// checked against its kind and bounds, part of the canonical parameters
// (so cache keys and cursors are the caller's own). An identity without
// the value is refused 403 identity_claim_missing; a value that does not
// check, 403 identity_claim_invalid (the caller cannot fix either).

// Binding is one value bound to the caller's identity.
type Binding struct {
	// Name is the SQL-mode parameter's, or the row filter's column.
	Name string
	From dataquery.From
}

// bindCaller refuses a client that sends a bound name, then adds each
// bound value from caller to vals.
func (rt *Route) bindCaller(vals url.Values, caller *upstream.Caller) *upstream.Refusal {
	for _, b := range rt.o.Bindings {
		if _, sent := vals[b.Name]; sent {
			return &upstream.Refusal{Reason: dataquery.ReasonUnknownParameter, Param: b.Name, Detail: "unknown parameter " + strconv.Quote(b.Name)}
		}
	}
	var app, subject string
	var claims map[string]string
	if caller != nil {
		app, subject, claims = caller.App, caller.Subject, caller.Claims
	}
	for _, b := range rt.o.Bindings {
		v, ok := b.From.Value(app, subject, claims)
		if !ok {
			return &upstream.Refusal{Reason: dataquery.ReasonIdentityClaimMissing, Param: b.Name, Detail: "the caller's identity has no " + b.From.String()}
		}
		vals[b.Name] = []string{v}
	}
	return nil
}

// boundRefusal turns a refusal of a bound value's type or bounds (the
// query's check, or the database's) into 403 identity_claim_invalid:
// the value came from the identity, not from the client.
func (rt *Route) boundRefusal(err error) error {
	var ref *upstream.Refusal
	if err == nil || !errors.As(err, &ref) || ref.Reason != dataquery.ReasonInvalidParameter || ref.Param == "" {
		return err
	}
	for _, b := range rt.o.Bindings {
		if b.Name == ref.Param {
			return &upstream.Refusal{Reason: dataquery.ReasonIdentityClaimInvalid, Param: b.Name,
				Detail: "the value of " + b.From.String() + " does not fit the bound parameter: " + ref.Detail}
		}
	}
	return err
}
