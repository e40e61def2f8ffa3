package admin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// This file serves the upstream reads: GET /api/v1/upstreams,
// /api/v1/upstreams/{name} and /api/v1/upstreams/{name}/endpoints.
//
// An upstream fed by a registry or by pushes may have 100,000 endpoints
// (discovery's MaxInstances): listed whole, that was 29.9 MB of JSON built
// in memory per read. So endpoint lists are pages (?limit, ?after: keyset
// by address, as Kong pages an upstream's targets and levee its apps), each
// answer says the total and the path of the next page, and the JSON is
// streamed: written through a 32 KiB buffer as the gateway hands over the
// views, which it builds a few hundred at a time (Gateway.Endpoints). What
// one read holds is the buffer and one chunk of views, whatever the
// upstream's size; heavy.go bounds how many such reads run at once.

const (
	// DefaultEndpointPage is the endpoints listed per upstream without
	// ?limit: every upstream of a static configuration fits whole, so
	// their answers are as before paging.
	DefaultEndpointPage = 1000
	// MaxEndpointPage is the largest ?limit (about 3 MB of JSON).
	MaxEndpointPage = 10000
	// maxAfterBytes bounds ?after: an endpoint address (host:port, a DNS
	// name at most 253 bytes) is far shorter.
	maxAfterBytes = 512
	// MaxQuarantinedShown bounds DiscoveryView.Quarantined: an update may
	// have 100,000 rejected instances, and every upstream read shows them.
	MaxQuarantinedShown = 100
	// streamBuffer is the bytes buffered before a write to the client;
	// endpointRoom the free space an endpoint is appended in (one with
	// registry-made strings is about 300 bytes).
	streamBuffer = 32 << 10
	endpointRoom = 2 << 10
)

// EndpointsPage is what Gateway.Endpoints says besides the endpoints.
type EndpointsPage struct {
	// Total is the upstream's endpoint count in the snapshot read.
	Total int
	// More is true when endpoints sort after the last one listed.
	More bool
}

// upstreamRoutes registers the upstream reads on mux.
func upstreamRoutes(mux *adminMux, gw Gateway) {
	mux.HandleFunc("GET /api/v1/upstreams", func(w http.ResponseWriter, r *http.Request) {
		q, ok := pageQuery(w, r)
		if !ok {
			return
		}
		if q.after != "" {
			writeError(w, http.StatusBadRequest, "bad_request",
				"after: pages one upstream's endpoints; use GET /api/v1/upstreams/{name}/endpoints?after=...")
			return
		}
		ups := gw.Upstreams()
		s := newStream(w)
		s.raw("{\n  \"upstreams\": [")
		for i, u := range ups {
			if i > 0 {
				s.raw(",")
			}
			s.raw("\n    ")
			s.upstream("    ", u, gw, q)
			if s.err != nil {
				return
			}
		}
		if len(ups) > 0 {
			s.raw("\n  ")
		}
		s.raw("]\n}\n")
		s.flush()
	})
	mux.HandleFunc("GET /api/v1/upstreams/{name}", func(w http.ResponseWriter, r *http.Request) {
		q, ok := pageQuery(w, r)
		if !ok {
			return
		}
		u, ok := findUpstream(w, gw, r.PathValue("name"))
		if !ok {
			return
		}
		s := newStream(w)
		s.upstream("", u, gw, q)
		s.raw("\n")
		s.flush()
	})
	mux.HandleFunc("GET /api/v1/upstreams/{name}/endpoints", func(w http.ResponseWriter, r *http.Request) {
		q, ok := pageQuery(w, r)
		if !ok {
			return
		}
		u, ok := findUpstream(w, gw, r.PathValue("name"))
		if !ok {
			return
		}
		s := newStream(w)
		s.raw("{\n  \"upstream\": ")
		s.value("", u.Name)
		s.raw(",\n  \"endpoints\": ")
		page, next := s.endpoints("  ", u.Name, gw, q)
		s.raw(",\n  \"total\": " + strconv.Itoa(page.Total))
		if next != "" {
			s.raw(",\n  \"next\": ")
			s.value("", next)
		}
		s.raw("\n}\n")
		s.flush()
	})
}

// findUpstream returns the serving upstream name, or answers 404.
func findUpstream(w http.ResponseWriter, gw Gateway, name string) (UpstreamView, bool) {
	for _, u := range gw.Upstreams() {
		if u.Name == name {
			return u, true
		}
	}
	writeError(w, http.StatusNotFound, "not_found", "no upstream named "+name)
	return UpstreamView{}, false
}

// pageReq is an endpoint list's query: the page size and where it starts.
type pageReq struct {
	limit int
	after string
}

// pageQuery reads ?limit (1 to MaxEndpointPage, DefaultEndpointPage when
// absent) and ?after (an address, at most maxAfterBytes); otherwise it has
// answered 400 naming the parameter and the value.
func pageQuery(w http.ResponseWriter, r *http.Request) (pageReq, bool) {
	q := pageReq{limit: DefaultEndpointPage}
	vals := r.URL.Query()
	for _, name := range []string{"limit", "after"} {
		if n := len(vals[name]); n > 1 {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("%s: given %d times; give it once", name, n))
			return q, false
		}
	}
	if s, ok := vals["limit"]; ok {
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 1 || n > MaxEndpointPage {
			writeError(w, http.StatusBadRequest, "bad_request",
				fmt.Sprintf("limit: must be a whole number from 1 to %d, got %q", MaxEndpointPage, clip(s[0])))
			return q, false
		}
		q.limit = n
	}
	q.after = vals.Get("after")
	if len(q.after) > maxAfterBytes {
		writeError(w, http.StatusBadRequest, "bad_request",
			fmt.Sprintf("after: must be an endpoint address of at most %d bytes, got %d bytes", maxAfterBytes, len(q.after)))
		return q, false
	}
	return q, true
}

// clip shortens a refused value for the error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// endpointsPath is the path of upstream name's endpoint page after after
// (the colon before a port is left as it is: a query may hold it).
func endpointsPath(name, after string, limit int) string {
	return "/api/v1/upstreams/" + url.PathEscape(name) + "/endpoints?after=" + strings.ReplaceAll(url.QueryEscape(after), "%3A", ":") +
		"&limit=" + strconv.Itoa(limit)
}

// stream writes an answer's JSON to the client as it is made, indented as
// writeJSON indents. The first write error sticks in err and ends the
// answer (the gateway's iteration stops with it).
type stream struct {
	w   *bufio.Writer
	err error
	buf bytes.Buffer
}

// newStream answers 200 with JSON that follows.
func newStream(w http.ResponseWriter) *stream {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	return &stream{w: bufio.NewWriterSize(w, streamBuffer)}
}

func (s *stream) raw(text string) {
	if s.err == nil {
		_, s.err = s.w.WriteString(text)
	}
}

func (s *stream) write(b []byte) {
	if s.err == nil {
		_, s.err = s.w.Write(b)
	}
}

// value writes v, a name or a path levee made, as indented JSON whose
// lines after the first begin with prefix, & left as it is.
func (s *stream) value(prefix string, v any) {
	s.buf.Reset()
	enc := json.NewEncoder(&s.buf)
	enc.SetIndent(prefix, "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.write(bytes.TrimSuffix(s.buf.Bytes(), []byte("\n")))
}

func (s *stream) flush() {
	if s.err == nil {
		s.err = s.w.Flush()
	}
}

// upstream writes u with a page of its endpoints, total and next link.
func (s *stream) upstream(prefix string, u UpstreamView, gw Gateway, q pageReq) {
	u.Endpoints, u.EndpointsTotal, u.EndpointsNext = nil, 0, ""
	s.buf.Reset()
	enc := json.NewEncoder(&s.buf)
	enc.SetIndent(prefix, "  ")
	if err := enc.Encode(u); err != nil {
		s.err = err
		return
	}
	// The head's object without its closing brace: the fields below
	// continue it.
	s.write(bytes.TrimSuffix(s.buf.Bytes(), []byte("\n"+prefix+"}\n")))
	s.raw(",\n" + prefix + "  \"endpoints\": ")
	page, next := s.endpoints(prefix+"  ", u.Name, gw, q)
	s.raw(",\n" + prefix + "  \"endpoints_total\": " + strconv.Itoa(page.Total))
	if next != "" {
		s.raw(",\n" + prefix + "  \"endpoints_next\": ")
		s.value("", next)
	}
	s.raw("\n" + prefix + "}")
}

// endpoints writes a JSON array of a page of upstream name's endpoints,
// each appended to the buffer as the gateway hands it over (no allocation
// per endpoint), and returns the page's figures and the next page's path
// ("" on the last page).
func (s *stream) endpoints(prefix, name string, gw Gateway, q pageReq) (EndpointsPage, string) {
	n, last := 0, ""
	item := prefix + "  "
	page, ok := gw.Endpoints(name, q.after, q.limit, func(ev EndpointView) bool {
		if n == 0 {
			s.raw("[\n")
		} else {
			s.raw(",\n")
		}
		s.raw(item)
		if s.err == nil && s.w.Available() < endpointRoom {
			s.err = s.w.Flush()
		}
		if s.err == nil {
			// Appended in the buffer's free space, which holds it but
			// for an endpoint of long strings (then append allocates).
			s.write(appendEndpoint(s.w.AvailableBuffer(), item, &ev))
		}
		n++
		last = ev.Address
		return s.err == nil
	})
	if n == 0 {
		s.raw("[]")
	} else {
		s.raw("\n" + prefix + "]")
	}
	if !ok || !page.More || n == 0 {
		return page, ""
	}
	return page, endpointsPath(name, last, q.limit)
}
