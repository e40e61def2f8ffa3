package dataapi

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/datacache"
	"github.com/levee-gw/levee/internal/dataformat"
	"github.com/levee-gw/levee/internal/dataquery"
	"github.com/levee-gw/levee/internal/datasource"
	"github.com/levee-gw/levee/internal/upstream"
)

// TestRefusalMapping: each failure of binding or querying becomes the
// refusal the reason table answers, the source's failures counted as its
// failures and the client's not; the client leaving stays its own error.
func TestRefusalMapping(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		ctx     context.Context
		err     error
		reason  string
		failure bool
	}{
		{live, &dataquery.Error{Param: "id", Reason: dataquery.ReasonInvalidParameter, Message: "bad"}, "invalid_parameter", false},
		{live, fmt.Errorf("wrapped: %w", datasource.ErrStatementTimeout), dataquery.ReasonStatementTimeout, true},
		{live, datasource.ErrPoolTimeout, dataquery.ReasonPoolExhausted, true},
		{live, datasource.ErrUnavailable, dataquery.ReasonSourceUnavailable, true},
		{live, datacache.SourceFailure(errors.New("leader's query failed")), dataquery.ReasonSourceUnavailable, true},
		{live, &datasource.QueryError{SQLState: "22P02", Err: errors.New("invalid input")}, "invalid_parameter", false},
		{live, &datasource.QueryError{SQLState: "42703", Err: errors.New("no such column")}, dataquery.ReasonQueryFailed, true},
		{gone, context.Canceled, "", false},
	} {
		got := refusal(c.ctx, c.err)
		var ref *upstream.Refusal
		if !errors.As(got, &ref) {
			if c.reason != "" {
				t.Errorf("%v: %v, want refusal %s", c.err, got, c.reason)
			}
			continue
		}
		if ref.Reason != c.reason || ref.Failure != c.failure {
			t.Errorf("%v: %s (failure %v), want %s (failure %v)", c.err, ref.Reason, ref.Failure, c.reason, c.failure)
		}
	}
}

// TestValueRefusedNamesParameter (issue 22, 6b): a value the database
// refused is 400 invalid_parameter naming the parameter when the database
// said which argument it was, and never repeats the SQLSTATE or the
// database's message.
func TestValueRefusedNamesParameter(t *testing.T) {
	q, err := dataquery.CompileSQL("SELECT * FROM t WHERE a = :a AND p > :price",
		[]dataquery.Param{{Name: "a", Type: dataquery.Int64}, {Name: "price", Type: dataquery.String}}, nil, dataquery.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	vals := url.Values{"a": {"1"}, "price": {"abc"}}
	dbErr := errors.New(`ERROR: invalid input syntax for type numeric: "abc" (SQLSTATE 22P02)`)
	for _, c := range []struct {
		err         error
		param, says string
	}{
		{&datasource.QueryError{SQLState: "22P02", Err: dbErr, Arg: 2}, "price", `the database refused the value of parameter "price"`},
		{fmt.Errorf("first row: %w", &datasource.QueryError{SQLState: "22003", Err: dbErr, Arg: 1}), "a", `parameter "a"`},
		{&datasource.QueryError{SQLState: "22012", Err: dbErr}, "", "the database refused a value of the request"},
		{&datasource.QueryError{SQLState: "22P02", Err: dbErr, Arg: 9}, "", "the database refused a value of the request"},
	} {
		var ref *upstream.Refusal
		if !errors.As(queryRefusal(context.Background(), c.err, q, vals, false), &ref) {
			t.Fatalf("%v: not a refusal", c.err)
		}
		if ref.Reason != dataquery.ReasonInvalidParameter || ref.Param != c.param || ref.Detail != c.says && !strings.Contains(ref.Detail, c.says) || ref.Failure {
			t.Errorf("%v: %+v, want invalid_parameter naming %q, saying %q", c.err, ref, c.param, c.says)
		}
		for _, leak := range []string{"SQLSTATE", "22", "syntax", "numeric", "abc"} {
			if strings.Contains(ref.Detail, leak) {
				t.Errorf("%v: detail %q repeats %q", c.err, ref.Detail, leak)
			}
		}
	}
}

// TestCacheKeyParts: answers differing in version, format, parameters,
// page size or cursor never share a cache key.
func TestCacheKeyParts(t *testing.T) {
	b := dataquery.Bound{Params: "customer_id=3", Limit: 10}
	base := cacheKey("v1", dataformat.JSON, b, url.Values{}, 0)
	other := []string{
		cacheKey("v2", dataformat.JSON, b, url.Values{}, 0),
		cacheKey("v1", dataformat.NDJSON, b, url.Values{}, 0),
		cacheKey("v1", dataformat.JSON, dataquery.Bound{Params: "customer_id=4", Limit: 10}, url.Values{}, 0),
		cacheKey("v1", dataformat.JSON, dataquery.Bound{Params: "customer_id=3", Limit: 11}, url.Values{}, 0),
		cacheKey("v1", dataformat.JSON, b, url.Values{"cursor": {"abc"}}, 0),
		cacheKey("v1", dataformat.JSON, b, url.Values{}, 5),
	}
	for i, k := range other {
		if k == base {
			t.Errorf("variant %d shares the key %q", i, k)
		}
	}
}
