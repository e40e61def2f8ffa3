package proxy

// Direct answers (config `redirect` and `respond`): a route with neither
// upstream nor data answers every request it takes itself, after the
// consumer step (so its auth and limits apply) and before memory and
// upstream admission, which it does not need. The route's response
// header changes apply to these answers.

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Direct is a route's own answer: exactly one of Redirect and Respond.
type Direct struct {
	Redirect *Redirect
	Respond  *Respond
}

// Redirect answers with a redirect.
type Redirect struct {
	// Status is 301, 302, 303, 307 or 308.
	Status int
	// HTTPS makes the Location https:// on the request's host, without
	// its port.
	HTTPS bool
	// StripQuery drops the request's query; otherwise it is appended when
	// the target has none.
	StripQuery bool

	to       []redirectPart // the compiled target; nil: the request's path
	absolute bool           // the target is an absolute URL
	hasQuery bool           // the target has a query of its own
}

// redirectPart is a literal or ${path} (isPath) or ${host} (isHost).
type redirectPart struct {
	lit            string
	isPath, isHost bool
}

// NewRedirect compiles a redirect to the target to ("" is the request's
// own path): an absolute http(s) URL or a path, with ${path} and ${host}
// (checked by the configuration).
func NewRedirect(status int, to string, https, stripQuery bool) (*Redirect, error) {
	switch status {
	case 301, 302, 303, 307, 308:
	default:
		return nil, fmt.Errorf("redirect status %d", status)
	}
	rd := &Redirect{Status: status, HTTPS: https, StripQuery: stripQuery}
	rd.absolute = strings.HasPrefix(to, "http://") || strings.HasPrefix(to, "https://")
	rd.hasQuery = strings.Contains(to, "?")
	if to == "" && !https {
		return nil, fmt.Errorf("a redirect needs a target or https")
	}
	s := to
	for range len(to) + 1 { // each turn consumes at least 3 bytes, or ends
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return nil, fmt.Errorf("redirect %q: \"${\" without \"}\"", to)
		}
		p := redirectPart{}
		switch s[i+2 : i+2+end] {
		case "path":
			p.isPath = true
		case "host":
			p.isHost = true
		default:
			return nil, fmt.Errorf("redirect %q: unknown variable ${%s}", to, s[i+2:i+2+end])
		}
		if i > 0 {
			rd.to = append(rd.to, redirectPart{lit: s[:i]})
		}
		rd.to = append(rd.to, p)
		s = s[i+2+end+1:]
	}
	if s != "" {
		rd.to = append(rd.to, redirectPart{lit: s})
	}
	return rd, nil
}

// Respond answers with a fixed status, body and content type.
type Respond struct {
	Status      int
	Body        []byte
	contentType []string
	length      []string
}

// NewRespond returns the fixed answer.
func NewRespond(status int, body, contentType string) *Respond {
	return &Respond{Status: status, Body: []byte(body), contentType: []string{contentType},
		length: []string{strconv.Itoa(len(body))}}
}

// serveDirect answers r with rt's own answer.
func serveDirect(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route) {
	h := w.Header()
	if rd := rt.Direct.Redirect; rd != nil {
		h["Location"] = []string{rd.location(r)}
		h["Content-Length"] = zeroLength
		answerHeaders(h, r, x)
		x.status = rd.Status
		w.WriteHeader(rd.Status)
		return
	}
	rs := rt.Direct.Respond
	h["Content-Type"] = rs.contentType
	noBody := rs.Status == http.StatusNoContent || rs.Status == http.StatusNotModified
	if !noBody {
		h["Content-Length"] = rs.length
	}
	answerHeaders(h, r, x)
	x.status = rs.Status
	w.WriteHeader(rs.Status)
	if !noBody && r.Method != http.MethodHead {
		n, _ := w.Write(rs.Body)
		x.bytesOut = int64(n)
	}
}

var zeroLength = []string{"0"}

// location builds the redirect's Location for r from the configured
// target and only the request's normalised path, its host (checked by the
// server: no CR, LF or space) and its query; every byte outside visible
// ASCII is percent-encoded (locationSafe), so nothing from the request can
// end the header. A path that would start with "//" (a protocol-relative
// URL, another site) has its leading slashes collapsed to one.
func (rd *Redirect) location(r *http.Request) string {
	path := r.URL.EscapedPath()
	if path == "" || path[0] != '/' { // a routed path starts with "/"; never let one extend a host
		path = "/" + path
	}
	var b strings.Builder
	if rd.HTTPS && !rd.absolute {
		b.WriteString("https://")
		b.WriteString(hostWithoutPort(r.Host))
	}
	if rd.to == nil {
		b.WriteString(oneLeadingSlash(path))
	}
	for i, p := range rd.to {
		switch {
		case p.isPath && i == 0:
			b.WriteString(oneLeadingSlash(path))
		case p.isPath:
			b.WriteString(path)
		case p.isHost:
			b.WriteString(r.Host)
		default:
			b.WriteString(p.lit)
		}
	}
	if !rd.StripQuery && !rd.hasQuery && r.URL.RawQuery != "" {
		b.WriteByte('?')
		b.WriteString(r.URL.RawQuery)
	}
	return locationSafe(b.String())
}

// oneLeadingSlash collapses a path's leading slashes (and backslashes,
// which browsers read as slashes) to one "/".
func oneLeadingSlash(p string) string {
	i := 0
	for i < len(p) && (p[i] == '/' || p[i] == '\\') {
		i++
	}
	if i <= 1 && (len(p) == 0 || p[0] == '/') {
		return p
	}
	return "/" + p[i:]
}

// hostWithoutPort is host (a Host header) less its port.
func hostWithoutPort(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return host
}

// locationSafe percent-encodes every byte of s that is not visible ASCII.
func locationSafe(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}
