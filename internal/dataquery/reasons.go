package dataquery

import "net/http"

// The refusal reasons of data routes besides the query string's (errors.go):
// the answer's format, and the data source failing. Package dataapi gives
// them; they are declared here with the others so the data reasons are one
// list (Reasons), from which the request path's refusal table derives its
// rows.
const (
	// ReasonNotAcceptable: the request's Accept names none of the route's
	// formats.
	ReasonNotAcceptable = "not_acceptable"
	// ReasonStatementTimeout: the query ran past its statement timeout.
	ReasonStatementTimeout = "statement_timeout"
	// ReasonSourceUnavailable: the database cannot be reached and no
	// answer fresh enough is cached.
	ReasonSourceUnavailable = "data_source_unavailable"
	// ReasonPoolExhausted: no connection of the source's pool came free.
	ReasonPoolExhausted = "db_pool_exhausted"
	// ReasonQueryFailed: the database refused or failed the query for
	// another reason.
	ReasonQueryFailed = "query_failed"
	// ReasonNotFound: a single-row route's query returned no row.
	ReasonNotFound = "not_found"
	// ReasonIdentityClaimMissing: a value the route binds to the caller's
	// identity (`from:`) is not in it: the token has no such claim (or
	// one that is not a string or a number), no subject, or no app.
	ReasonIdentityClaimMissing = "identity_claim_missing"
	// ReasonIdentityClaimInvalid: the identity's value does not check
	// against the bound parameter's (or row filter column's) type or
	// bounds.
	ReasonIdentityClaimInvalid = "identity_claim_invalid"
)

// DetailMoreThanOneRow is the detail of the query_failed answer of a
// single-row route whose query returned more than one row: the route's
// SQL (or the data) breaks its promise of one row at most, a fault of the
// route, not of the request.
const DetailMoreThanOneRow = "more_than_one_row"

// ReasonSpec is one data refusal reason: everything the request path's
// refusal table (package proxy's reasonTable) says about it.
type ReasonSpec struct {
	Reason string
	// Status is the HTTP status it is answered with.
	Status int
	// RetryAfter: the answer carries Retry-After (the client may retry
	// the same request later).
	RetryAfter bool
	// Shed: admission let the query in but it was turned away before it
	// ran (counted in levee_shed_total too).
	Shed bool
	// Sentence is the "error" member of the JSON body.
	Sentence string
	// When is the documentation's "when" column (Markdown).
	When string
	// Gives says whether a route of shape s can answer with the reason
	// (nil: every data route can).
	Gives func(s RouteShape) bool
}

// RouteShape is what of a data route's declaration decides which of the
// reasons it can give.
type RouteShape struct {
	// SQL is true for a SQL-mode route, false for a table-mode one.
	SQL bool
	// Required is true when a parameter is required.
	Required bool
	// Filters is true when a column is filterable.
	Filters bool
	// Paged is true when JSON answers are paged.
	Paged bool
	// Single is true when the route answers one row (`single: true`).
	Single bool
	// Bound is true when a parameter or a row filter is bound to the
	// caller's identity (`from:`).
	Bound bool
}

// reasons is every data refusal reason: the query string's, then the
// answer's and the source's (the OpenAPI document lists a route's in this
// order).
var reasons = [...]ReasonSpec{
	{Reason: ReasonMissingParameter, Status: http.StatusBadRequest,
		Sentence: "a required query parameter is missing",
		When:     "a data route's required parameter is not in the query string (`parameter` names it)",
		Gives:    func(s RouteShape) bool { return s.Required }},
	{Reason: ReasonInvalidParameter, Status: http.StatusBadRequest,
		Sentence: "a query parameter's value is malformed or out of bounds",
		When:     "a data route's parameter or filter value does not parse as its type or is outside its bounds, or `select=`, `order=`, an `or=` group or `Prefer: count=` is refused (`parameter`, `detail`)"},
	{Reason: ReasonUnknownParameter, Status: http.StatusBadRequest,
		Sentence: "the query string has a parameter this route does not declare",
		When:     "a query key of a data route is neither a declared parameter, an allowed filter, nor `limit` or `cursor`"},
	{Reason: ReasonDuplicateParameter, Status: http.StatusBadRequest,
		Sentence: "a query parameter is given more than once",
		When:     "a data route's parameter that takes one value appears twice (SQL-mode parameters, `limit`, `cursor`, `select`, `order`, `or`, `and`)"},
	{Reason: ReasonOperatorNotAllowed, Status: http.StatusBadRequest,
		Sentence: "this filter operator is not allowed on this column",
		When:     "a table-mode filter uses an operator its column's `filters` entry does not list",
		Gives:    func(s RouteShape) bool { return s.Filters }},
	{Reason: ReasonInvalidCursor, Status: http.StatusBadRequest,
		Sentence: "the page cursor is malformed, tampered with, or from another route or query",
		When:     "`cursor=` is not one levee issued for this route, its version and these parameters",
		Gives:    func(s RouteShape) bool { return s.Paged }},
	{Reason: ReasonInvalidLimit, Status: http.StatusBadRequest,
		Sentence: "the page limit is not a whole number within the route's maximum",
		When:     "`limit=` is not an integer from 1 to the route's `page.max` (JSON pages) or `limits.max_rows` (NDJSON, CSV, unpaged JSON)"},
	{Reason: ReasonNotFound, Status: http.StatusNotFound,
		Sentence: "no row matches the request",
		When:     "a `single: true` data route's query returned no row (an unknown id)",
		Gives:    func(s RouteShape) bool { return s.Single }},
	{Reason: ReasonIdentityClaimMissing, Status: http.StatusForbidden,
		Sentence: "the caller's identity lacks a value this route binds",
		When:     "a data route binds a parameter or row filter to the caller (`from: claim.<name>`, `subject`, `app.id`) and the verified identity has no such value: the token has no such claim, or one that is not a string or a number (`parameter` names the bound parameter, `detail` the source)",
		Gives:    func(s RouteShape) bool { return s.Bound }},
	{Reason: ReasonIdentityClaimInvalid, Status: http.StatusForbidden,
		Sentence: "a value of the caller's identity does not fit the parameter this route binds it to",
		When:     "the identity's value for a bound parameter or row filter does not parse as its type or is outside its bounds (`parameter`, `detail`)",
		Gives:    func(s RouteShape) bool { return s.Bound }},
	{Reason: ReasonNotAcceptable, Status: http.StatusNotAcceptable,
		Sentence: "this route cannot answer in any format the request accepts",
		When:     "the request's `Accept` names none of the data route's `formats`"},
	{Reason: ReasonStatementTimeout, Status: http.StatusGatewayTimeout,
		Sentence: "the query did not finish within its statement timeout and was cancelled",
		When:     "a data route's query ran past `statement_timeout`; it was cancelled in the database"},
	{Reason: ReasonSourceUnavailable, Status: http.StatusServiceUnavailable, RetryAfter: true,
		Sentence: "the data source is unavailable and nothing fresh enough is cached; retry later",
		When:     "the database cannot be reached (within its connect timeout) and the route has no answer within `cache.stale_if_error`"},
	{Reason: ReasonPoolExhausted, Status: http.StatusServiceUnavailable, RetryAfter: true, Shed: true,
		Sentence: "the data source has no free connection; retry later",
		When:     "admission let the query in but none of the source's `max_conns` connections came free within its statement timeout (admission keeps queries within `max_conns`, so this takes connections held outside it)"},
	{Reason: ReasonQueryFailed, Status: http.StatusBadGateway,
		Sentence: "the data source failed to run the query",
		When:     "the database refused or failed a data route's query for another reason than a timeout or a lost connection (logged with its SQLSTATE), or a `single: true` route's query returned more than one row (`detail` `more_than_one_row`)"},
}

// Reasons lists every data refusal reason (a new slice each call).
func Reasons() []ReasonSpec { return append([]ReasonSpec(nil), reasons[:]...) }

// LookupReason returns reason's row; ok is false for a reason that is not
// a data reason.
func LookupReason(reason string) (ReasonSpec, bool) {
	for _, r := range reasons {
		if r.Reason == reason {
			return r, true
		}
	}
	return ReasonSpec{}, false
}

// RouteReasons lists the data reasons a route of shape s can give, in
// Reasons' order.
func RouteReasons(s RouteShape) []string {
	out := make([]string, 0, len(reasons))
	for _, r := range reasons {
		if r.Gives == nil || r.Gives(s) {
			out = append(out, r.Reason)
		}
	}
	return out
}
