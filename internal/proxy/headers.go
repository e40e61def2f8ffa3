package proxy

// A route's header changes (config `headers`): fields set, added or
// removed on the request levee forwards, after the consumer step (auth
// read the request as the client sent it, and its own changes, such as
// Levee-App, are made by then), and on the upstream's answer or a direct
// answer (direct.go), never on levee's refusals. Values are templates
// over a fixed set of variables, compiled once when the table is built;
// a route without changes pays one nil check.

import (
	"crypto/x509/pkix"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Headers are a route's header changes, each direction nil when it has
// none.
type Headers struct {
	Request  *HeaderOps
	Response *HeaderOps
}

// HeaderOps are one direction's changes, applied in the order remove,
// set, add.
type HeaderOps struct {
	Remove []string // canonical names
	Set    []HeaderOp
	Add    []HeaderOp
}

// HeaderOp is one field set or added: its canonical name and its value,
// compiled (NewHeaderOp).
type HeaderOp struct {
	Name string
	// fixed is the value of a template without variables, built once so
	// that setting it allocates nothing; nil when parts must be expanded.
	fixed []string
	parts []headerPart
}

// headerPart is a literal (v == varNone) or a variable of a value.
type headerPart struct {
	lit string
	v   headerVar
}

type headerVar uint8

const (
	varNone headerVar = iota
	varClientIP
	varRequestID
	varRoute
	varApp
	varHost
	varTLSClientSubject
)

// headerVars names the variables (config.HeaderVars is the same list).
var headerVars = map[string]headerVar{
	"client_ip": varClientIP, "request_id": varRequestID, "route": varRoute,
	"app": varApp, "host": varHost, "tls_client_subject": varTLSClientSubject,
}

// maxExpanded bounds an expanded value: variables come from the request
// (the host, a certificate's subject), so their length is cut here.
const maxExpanded = 8 << 10

// NewHeaderOp compiles the value template tmpl of field name (canonical),
// whose "${var}" are expanded per request. The configuration has checked
// both; an unknown variable here is an error all the same.
func NewHeaderOp(name, tmpl string) (HeaderOp, error) {
	op := HeaderOp{Name: name}
	s := tmpl
	for range len(tmpl) + 1 { // each turn consumes at least 3 bytes, or ends
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return op, fmt.Errorf("header %s: %q has \"${\" without \"}\"", name, tmpl)
		}
		v, ok := headerVars[s[i+2:i+2+end]]
		if !ok {
			return op, fmt.Errorf("header %s: unknown variable ${%s}", name, s[i+2:i+2+end])
		}
		if i > 0 {
			op.parts = append(op.parts, headerPart{lit: s[:i]})
		}
		op.parts = append(op.parts, headerPart{v: v})
		s = s[i+2+end+1:]
	}
	if len(op.parts) == 0 {
		op.fixed = []string{tmpl}
		return op, nil
	}
	if s != "" {
		op.parts = append(op.parts, headerPart{lit: s})
	}
	return op, nil
}

// apply makes o's changes to h for the request r of exchange x.
func (o *HeaderOps) apply(h http.Header, r *http.Request, x *exchange) {
	for _, k := range o.Remove {
		delete(h, k)
	}
	for i := range o.Set {
		op := &o.Set[i]
		if op.fixed != nil {
			h[op.Name] = op.fixed
		} else {
			h[op.Name] = []string{op.expand(r, x)}
		}
	}
	for i := range o.Add {
		op := &o.Add[i]
		if op.fixed != nil {
			h[op.Name] = append(h[op.Name], op.fixed[0])
		} else {
			h[op.Name] = append(h[op.Name], op.expand(r, x))
		}
	}
}

// expand builds op's value for r. Each variable's value is cleaned of
// anything that is not a field-value character (fieldSafe), so no
// request byte can end or split a header.
func (op *HeaderOp) expand(r *http.Request, x *exchange) string {
	var b strings.Builder
	for _, p := range op.parts {
		if p.v == varNone {
			b.WriteString(p.lit)
			continue
		}
		fieldSafe(&b, varValue(p.v, r, x))
		if b.Len() > maxExpanded {
			break
		}
	}
	s := b.String()
	if len(s) > maxExpanded {
		s = s[:maxExpanded]
	}
	return strings.TrimSpace(s)
}

// varValue is one variable's value for r.
func varValue(v headerVar, r *http.Request, x *exchange) string {
	switch v {
	case varClientIP:
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			return ap.Addr().Unmap().String()
		}
		return ""
	case varRequestID:
		return x.reqID
	case varRoute:
		return x.route.Name
	case varApp:
		if x.app != nil {
			return x.app.ID
		}
		return ""
	case varHost:
		return r.Host
	case varTLSClientSubject:
		return tlsClientSubject(r)
	}
	return ""
}

// tlsClientSubject is the subject of the client's verified TLS
// certificate (RFC 2253 form), "" without one. The one accessor of the
// client certificate for header values.
func tlsClientSubject(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return ""
	}
	var name pkix.Name = r.TLS.PeerCertificates[0].Subject
	return name.String()
}

// fieldSafe writes s to b less the bytes a field value may not hold
// (RFC 9110 section 5.5: controls other than tab, DEL).
func fieldSafe(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c >= ' ' || c == '\t') && c != 0x7f {
			b.WriteByte(c)
		}
	}
}
