package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRefuseEveryReason: each reason Refuse writes answers with its row's
// status, a JSON body of its sentence and name, nosniff, an exact
// Content-Length, and Retry-After as its row says: exactly on 503 and 429,
// except where the rate limiter sets its own. The statuses themselves are
// pinned by the documented tables (TestRefusalTablesInDocs).
func TestRefuseEveryReason(t *testing.T) {
	written := 0
	for _, s := range reasonTable {
		if s.Listener {
			if rf := refusals[s.Reason]; rf != nil {
				t.Errorf("%s: written by the listener, yet Refuse renders it", s.Reason)
			}
			continue
		}
		written++
		reason, status := s.Reason, s.Status
		rec := httptest.NewRecorder()
		if got := Refuse(rec, reason); got != status || rec.Code != status || StatusOf(reason) != status {
			t.Errorf("%s: Refuse returned %d, wrote %d, StatusOf %d; want %d", reason, got, rec.Code, StatusOf(reason), status)
		}
		var body struct{ Error, Reason string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: body %q: %v", reason, rec.Body.String(), err)
		}
		if body.Reason != string(reason) || body.Error != s.Sentence || s.Sentence == "" {
			t.Errorf("%s: body %+v", reason, body)
		}
		h := rec.Header()
		if h.Get("Content-Type") != "application/json" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", reason, h)
		}
		if h.Get("Content-Length") != itoa(rec.Body.Len()) {
			t.Errorf("%s: Content-Length %s, body %d bytes", reason, h.Get("Content-Length"), rec.Body.Len())
		}
		callerRetryAfter := s.RetryAfter == retryAfterCaller
		if (!callerRetryAfter && (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests)) != (h.Get("Retry-After") != "") {
			t.Errorf("%s: Retry-After %q with status %d", reason, h.Get("Retry-After"), status)
		}
		if want := map[retryAfterKind]string{retryAfterSoon: "1"}[s.RetryAfter]; h.Get("Retry-After") != want {
			t.Errorf("%s: Retry-After %q, want %q", reason, h.Get("Retry-After"), want)
		}
	}
	if written != len(refusals) || written == 0 {
		t.Fatalf("table has %d reasons Refuse writes, package renders %d", written, len(refusals))
	}
}

// TestRefuseDetail: the detail joins the JSON body, the length stays exact,
// and the rendered body is reused.
func TestRefuseDetail(t *testing.T) {
	for range 2 {
		rec := httptest.NewRecorder()
		if got := RefuseDetail(rec, ReasonUnauthenticated, "unknown_key"); got != 401 {
			t.Fatalf("status %d", got)
		}
		var body struct{ Error, Reason, Detail string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q: %v", rec.Body.String(), err)
		}
		if body.Reason != "unauthenticated" || body.Detail != "unknown_key" || body.Error == "" {
			t.Fatalf("body %+v", body)
		}
		if rec.Header().Get("Content-Length") != itoa(rec.Body.Len()) {
			t.Fatalf("Content-Length %s, body %d bytes", rec.Header().Get("Content-Length"), rec.Body.Len())
		}
	}
}

func TestRefuseUnknownReasonIs500(t *testing.T) {
	rec := httptest.NewRecorder()
	if got := Refuse(rec, Reason("no_such_reason")); got != 500 || rec.Code != 500 {
		t.Fatalf("status %d / %d", got, rec.Code)
	}
	if StatusOf("no_such_reason") != 0 {
		t.Error("StatusOf an unknown reason is not 0")
	}
}

func TestRefuseDoesNotAllocateMuch(t *testing.T) {
	w := &discardWriter{h: http.Header{}}
	allocs := testing.AllocsPerRun(1000, func() {
		clear(w.h)
		Refuse(w, ReasonNoAvailableEndpoint)
	})
	// The header map may grow once; the body and header values are
	// pre-rendered.
	if allocs > 1 {
		t.Errorf("Refuse allocates %.1f times per call, want <= 1", allocs)
	}
}

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestRequestID(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		keep bool
	}{
		{[]string{"abc-123"}, true},
		{[]string{"a b"}, false},    // space
		{[]string{"id\x01"}, false}, // control character
		{[]string{"é"}, false},      // non-ASCII
		{[]string{""}, false},       // empty
		{[]string{string(make([]byte, 129))}, false},
		{[]string{"one", "two"}, false}, // ambiguous: two ids
	} {
		h := http.Header{"X-Request-Id": tc.in}
		got := requestID(h)
		if tc.keep && got != tc.in[0] {
			t.Errorf("%q: got %q, want it kept", tc.in, got)
		}
		if !tc.keep && (len(got) != 16 || got == tc.in[0]) {
			t.Errorf("%q: got %q, want a fresh 16-character id", tc.in, got)
		}
	}
	if a, b := requestID(http.Header{}), requestID(http.Header{}); a == b {
		t.Errorf("two generated ids are equal: %q", a)
	}
}
