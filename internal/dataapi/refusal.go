package dataapi

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"

	"github.com/levee-gw/levee/internal/datacache"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
	"github.com/levee-gw/levee/internal/upstream"
)

// unavailableRetryAfter is the Retry-After of a source that is down: long
// enough that a client's retry may find it back, short enough not to
// strand anyone (the source's own reconnects are on the same scale).
const unavailableRetryAfter = 2 * time.Second

// refusal turns a failure of binding or querying into the attempt's
// *upstream.Refusal, or returns err unchanged when it is the caller's own
// context ending (the client left: the request path records 499).
func refusal(ctx context.Context, err error) error {
	var qe *dataquery.Error
	if errors.As(err, &qe) {
		return &upstream.Refusal{Reason: qe.Reason, Param: qe.Param, Detail: qe.Message}
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	switch {
	case errors.Is(err, datasource.ErrStatementTimeout):
		return &upstream.Refusal{Reason: dataquery.ReasonStatementTimeout, Failure: true}
	case errors.Is(err, datasource.ErrPoolTimeout):
		return &upstream.Refusal{Reason: dataquery.ReasonPoolExhausted, Failure: true}
	case errors.Is(err, datasource.ErrUnavailable), errors.Is(err, datasource.ErrClosed), datacache.IsSourceFailure(err):
		return &upstream.Refusal{Reason: dataquery.ReasonSourceUnavailable, RetryAfter: unavailableRetryAfter, Failure: true}
	}
	var dbe *datasource.QueryError
	if errors.As(err, &dbe) && dbe.ClientFault() {
		return valueRefused("")
	}
	return &upstream.Refusal{Reason: dataquery.ReasonQueryFailed, Failure: true}
}

// queryRefusal is refusal for the failure of the statement q bound from
// vals: a value the database refused names the request's parameter when
// the database said which bind argument it could not read.
func queryRefusal(ctx context.Context, err error, q dataquery.Query, vals url.Values, paged bool) error {
	var dbe *datasource.QueryError
	if errors.As(err, &dbe) && dbe.ClientFault() && dbe.Arg > 0 && ctx.Err() == nil {
		return valueRefused(q.ArgParam(vals, paged, dbe.Arg-1))
	}
	return refusal(ctx, err)
}

// valueRefused is the answer to a value the database refused (SQLSTATE
// class 22, or one the driver could not encode for its placeholder): 400
// invalid_parameter naming the parameter when known (param ""
// otherwise). Neither the SQLSTATE nor the database's message is
// repeated: they are the database's, and the log has them.
func valueRefused(param string) *upstream.Refusal {
	if param == "" {
		return &upstream.Refusal{Reason: dataquery.ReasonInvalidParameter,
			Detail: "the database refused a value of the request"}
	}
	return &upstream.Refusal{Reason: dataquery.ReasonInvalidParameter, Param: param,
		Detail: "the database refused the value of parameter " + strconv.Quote(param)}
}

// sourceFailed reports whether err is the source failing (down, timing
// out), which lets a cached answer be served stale.
func sourceFailed(err error) bool {
	return errors.Is(err, datasource.ErrUnavailable) || errors.Is(err, datasource.ErrStatementTimeout) ||
		errors.Is(err, datasource.ErrPoolTimeout)
}
