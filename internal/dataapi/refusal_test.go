package dataapi

import (
	"context"
	"errors"
	"fmt"
	"net/url"
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
		{live, fmt.Errorf("wrapped: %w", datasource.ErrStatementTimeout), ReasonStatementTimeout, true},
		{live, datasource.ErrPoolTimeout, ReasonPoolExhausted, true},
		{live, datasource.ErrUnavailable, ReasonSourceUnavailable, true},
		{live, datacache.SourceFailure(errors.New("leader's query failed")), ReasonSourceUnavailable, true},
		{live, &datasource.QueryError{SQLState: "22P02", Err: errors.New("invalid input")}, "invalid_parameter", false},
		{live, &datasource.QueryError{SQLState: "42703", Err: errors.New("no such column")}, ReasonQueryFailed, true},
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

// TestCacheKeyParts: answers differing in version, format, parameters,
// page size or cursor never share a cache key.
func TestCacheKeyParts(t *testing.T) {
	b := dataquery.Bound{Params: "customer_id=3", Limit: 10}
	base := cacheKey("v1", dataformat.JSON, b, url.Values{})
	other := []string{
		cacheKey("v2", dataformat.JSON, b, url.Values{}),
		cacheKey("v1", dataformat.NDJSON, b, url.Values{}),
		cacheKey("v1", dataformat.JSON, dataquery.Bound{Params: "customer_id=4", Limit: 10}, url.Values{}),
		cacheKey("v1", dataformat.JSON, dataquery.Bound{Params: "customer_id=3", Limit: 11}, url.Values{}),
		cacheKey("v1", dataformat.JSON, b, url.Values{"cursor": {"abc"}}),
	}
	for i, k := range other {
		if k == base {
			t.Errorf("variant %d shares the key %q", i, k)
		}
	}
}
