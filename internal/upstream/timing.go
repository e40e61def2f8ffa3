package upstream

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// Timing is what a forwarder measured of one attempt, for the access log.
// Forwarders fill it when Outbound.Timing is set and leave it alone
// otherwise (so measuring costs nothing with the access log off). Zero
// fields mean "not measured".
type Timing struct {
	// Connect is how long establishing the attempt's connection took; 0
	// when it reused a pooled one.
	Connect time.Duration
	// FirstByte is from starting to write the request on the connection
	// to reading the first byte of the response.
	FirstByte time.Duration
}

// stdTrace measures a Timing through net/http's client trace hooks. The
// hooks may run on the transport's goroutines, even after RoundTrip
// returned (a dial that lost the race to an idle connection, a read loop
// ending), so the times are atomics and the Timing is filled once, by the
// request's goroutine, after RoundTrip.
type stdTrace struct {
	trace                    httptrace.ClientTrace
	getConn, gotConn, gotTTF atomic.Int64 // monotonic offsets from base, ns
	reused                   atomic.Bool
	base                     time.Time
}

// roundTripTimed is rt.RoundTrip(req) with its connect and first-byte
// times put in tm. It costs a few allocations (the trace, its hooks, the
// context), paid only with the access log on and only off the fast path.
func roundTripTimed(ctx context.Context, rt http.RoundTripper, r *http.Request, o Outbound) (*http.Response, error) {
	st := &stdTrace{base: time.Now()}
	st.trace = httptrace.ClientTrace{
		GetConn: func(string) { st.getConn.Store(int64(time.Since(st.base))) },
		GotConn: func(i httptrace.GotConnInfo) {
			st.reused.Store(i.Reused)
			st.gotConn.Store(int64(time.Since(st.base)))
		},
		GotFirstResponseByte: func() { st.gotTTF.Store(int64(time.Since(st.base))) },
	}
	ctx = httptrace.WithClientTrace(ctx, &st.trace)
	resp, err := rt.RoundTrip(OutboundRequest(ctx, r, o))
	got, ttf := st.gotConn.Load(), st.gotTTF.Load()
	*o.Timing = Timing{}
	if got != 0 && !st.reused.Load() {
		o.Timing.Connect = time.Duration(got - st.getConn.Load())
	}
	if got != 0 && ttf > got {
		o.Timing.FirstByte = time.Duration(ttf - got)
	}
	return resp, err
}
