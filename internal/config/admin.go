package config

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// AdminToken is one admin API bearer token with its scope
// (`admin.tokens[i]`).
type AdminToken struct {
	// File holds the token (`file`, required), read as admin.token_file
	// is: one line of at least 16 printable characters, at most 4KiB, at
	// start and on every reload.
	File string
	// Scope is AdminScopeRead ("read": GET and HEAD requests only, which
	// include /metrics, pprof and the JSON views) or AdminScopeWrite
	// ("write": everything, as admin.token_file) (`scope`, required: no
	// default, so that a token's power is always written next to it).
	Scope string
}

// The accepted values of AdminToken.Scope.
const (
	AdminScopeRead  = "read"
	AdminScopeWrite = "write"
)

// MaxAdminTokens bounds admin.tokens: every admin request is compared
// with each token.
const MaxAdminTokens = 64

var adminScopes = []string{AdminScopeRead, AdminScopeWrite}

// The accepted values of Admin.Token.
const (
	// AdminTokenGenerate: without token_file and tokens, levee makes a
	// write token in state_dir's AdminTokenFileName on its first start.
	AdminTokenGenerate = "generate"
	// AdminTokenNone: without token_file and tokens, the admin API is
	// open (loopback listeners only).
	AdminTokenNone = "none"
)

var adminTokenModes = []string{AdminTokenGenerate, AdminTokenNone}

// AdminTokenFileName is the file under state_dir holding the write token
// levee generates when no token is configured (admin.token: generate).
// `levee apps` and `levee data-apis` read it when given no -token-file.
const AdminTokenFileName = "admin-token"

// MaxAdminHosts bounds admin.hosts: every admin request's Host is
// compared with each.
const MaxAdminHosts = 64

// hostNamePattern is the rule of an admin.hosts item: a DNS name in lower
// case, labels of 1 to 63 letters, digits and inner hyphens, no port, no
// trailing dot.
const hostNamePattern = `^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`

var hostNameRE = regexp.MustCompile(hostNamePattern)

// checkAdminHosts reads admin.hosts: distinct lower-case host names.
func checkAdminHosts(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	items, ok := p.Sequence(path, n)
	if !ok {
		return false
	}
	if len(items) > MaxAdminHosts {
		p.Add(n, path, "at most %d host names, got %d", MaxAdminHosts, len(items))
		return false
	}
	var hosts []string
	for i, item := range items {
		ip := engine.Index(path, i)
		s, sok := p.Str(ip, item)
		switch {
		case !sok:
			ok = false
		case !hostNameRE.MatchString(s):
			p.Add(item, ip, "must be a host name in lower case without port (labels of a-z, 0-9 and inner \"-\", at most 63 each), got %s", engine.Quote(s))
			ok = false
		case slices.Contains(hosts, s):
			p.Add(item, ip, "duplicate host %s", engine.Quote(s))
			ok = false
		default:
			hosts = append(hosts, s)
		}
	}
	if ok {
		*ptr.(*[]string) = hosts
	}
	return ok
}

// ReadAdminTokens reads the token of admin.token_file (scope write) and of
// each admin.tokens file, in that order, with the field path of each
// problem. A token held by two files is an error: its scope would be
// ambiguous. Parse calls it, and so does the gateway at start and on every
// reload, so that `levee validate` and `levee run` refuse the same files.
func ReadAdminTokens(a Admin) (tokens []string, scopes []string, errs Errors) {
	first := map[string]string{} // token -> path of its first file
	add := func(path, file, scope string) {
		tok, err := ReadTokenFile(file)
		if err != nil {
			errs = append(errs, FieldError{Path: path, Message: err.Error()})
			return
		}
		if p, dup := first[tok]; dup {
			errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("holds the same token as %s (one token, one scope)", p)})
			return
		}
		first[tok] = path
		tokens, scopes = append(tokens, tok), append(scopes, scope)
	}
	if a.TokenFile != "" {
		add("admin.token_file", a.TokenFile, AdminScopeWrite)
	}
	for i, t := range a.Tokens {
		add(fmt.Sprintf("admin.tokens[%d].file", i), t.File, t.Scope)
	}
	return tokens, scopes, errs
}

// adminTokens reads `admin.tokens` into a.Tokens (after a.TokenFile) and
// reads each file as the gateway will, and reports whether the list could
// be read.
func (p *parser) adminTokens(a *Admin, n *yaml.Node) bool {
	const path = "admin.tokens"
	items, ok := p.Sequence(path, n)
	if !ok {
		return false
	}
	if len(items) > MaxAdminTokens {
		p.Add(n, path, "at most %d tokens, got %d", MaxAdminTokens, len(items))
		return false
	}
	ok = true
	files := map[string]int{}
	var fileNodes []*yaml.Node
	for i, item := range items {
		ip := engine.Index(path, i)
		if item.Kind == yaml.AliasNode {
			ok = false
			continue
		}
		if engine.IsNull(item) || item.Kind != yaml.MappingNode {
			p.Add(item, ip, "must be a mapping {file, scope}, got %s", engine.Describe(item))
			ok = false
			continue
		}
		f, fok := p.Block(ip, item, adminTokenBlock)
		if !fok {
			ok = false
			continue
		}
		var t AdminToken
		if p.Bind(f, item, ip, adminTokenBlock, &t) != nil { // file and scope
			ok = false
			continue
		}
		fv := f["file"]
		if j, dup := files[t.File]; dup {
			p.Add(fv, engine.Key(ip, "file"), "duplicate file %s (first at admin.tokens[%d])", engine.Quote(t.File), j)
			ok = false
			continue
		}
		files[t.File] = i
		a.Tokens = append(a.Tokens, t)
		fileNodes = append(fileNodes, fv)
	}
	_, _, errs := ReadAdminTokens(*a)
	for _, e := range errs {
		var i int
		if _, err := fmt.Sscanf(e.Path, "admin.tokens[%d].file", &i); err != nil || i >= len(fileNodes) {
			continue // admin.token_file: reported where it is read
		}
		p.Add(fileNodes[i], e.Path, "%s", e.Message)
	}
	return ok
}

// checkTokenFile refuses an admin token file that cannot be read as the
// gateway will read it (ReadTokenFile).
func checkTokenFile(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	if _, err := ReadTokenFile(*ptr.(*string)); err != nil {
		p.Add(n, path, "%v", err)
		return false
	}
	return true
}

// admin reads `admin`, whose listen address is required and must not
// collide with the data-plane listener (checked when listenOK).
func (p *parser) admin(c *Config, n, root *yaml.Node, listenOK bool) {
	parent := n
	if parent == nil {
		parent = root
	}
	f, ok := p.Block("admin", n, adminBlock)
	if !ok {
		return
	}
	bad := p.Bind(f, parent, "admin", adminBlock, &c.Admin) // listen and token_file
	// A token_file that is not a string names no file, yet one was
	// meant: the loopback rule below then says nothing.
	tokenOK := !bad["token_file"] || engine.IsString(f["token_file"])
	if v := f["tokens"]; v != nil {
		tokenOK = p.adminTokens(&c.Admin, v) && tokenOK
	}
	if bad["listen"] {
		return
	}
	s, v := c.Admin.Listen, f["listen"]
	tv := f["token"]
	explicitNone := tv != nil && !bad["token"] && c.Admin.Token == AdminTokenNone
	if c.Admin.TokenFile == "" && len(c.Admin.Tokens) == 0 && tokenOK && !isLoopbackListen(s) && !explicitNone {
		p.Add(v, "admin.token_file", "required when admin.listen is not a loopback address (127.0.0.0/8, ::1, localhost), got admin.listen %s", engine.Quote(s))
	}
	if tv != nil && !bad["token"] {
		switch {
		case f["token_file"] != nil || f["tokens"] != nil:
			p.Add(tv, "admin.token", "applies only without admin.token_file and admin.tokens (they set the tokens), got %s", engine.Quote(c.Admin.Token))
		case explicitNone && !isLoopbackListen(s):
			p.Add(tv, "admin.token", "%s (no token) is allowed only with a loopback admin.listen (127.0.0.0/8, ::1, localhost), got admin.listen %s; set admin.token_file or admin.tokens instead", engine.Quote(AdminTokenNone), engine.Quote(s))
		}
	}
	for _, l := range c.listenAddrs() {
		if listenOK && sameBinding(s, l) {
			p.Add(v, "admin.listen", "must not bind the same port as listen (%q), got %q", l, s)
		}
	}
}

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	adminTokenBlock = engine.NewBlock(
		engine.Field{Name: "file", Kind: engine.KindString, Required: true, Doc: "file holding the token; distinct across tokens",
			Bind: engine.At(func(t *AdminToken) *string { return &t.File })},
		engine.Field{Name: "scope", Kind: engine.KindEnum, Enum: adminScopes, Required: true, Doc: "what the token may do",
			Bind: engine.At(func(t *AdminToken) *string { return &t.Scope })},
	)
	adminBlock = engine.NewBlock(
		engine.Field{Name: "listen", Kind: engine.KindString, Required: true, Doc: "host:port of the admin API; not the data-plane port", Reload: engine.Restart,
			Check: checkListen, Bind: engine.At(func(a *Admin) *string { return &a.Listen })},
		engine.Field{Name: "token_file", Kind: engine.KindString, Doc: "file holding the full-scope admin token; required off loopback unless tokens are set",
			Check: checkTokenFile, Bind: engine.At(func(a *Admin) *string { return &a.TokenFile }), NotSecret: "a path; the token is read from the file"},
		engine.Field{Name: "tokens", Kind: engine.KindList, MaxItems: MaxAdminTokens, Item: &engine.Field{Kind: engine.KindBlock, Sub: adminTokenBlock},
			Doc: "admin tokens with a scope, each in its own file", NotSecret: "paths and scopes; each token is read from its file"},
		engine.Field{Name: "token", Kind: engine.KindEnum, Enum: adminTokenModes, Def: DefaultAdminToken,
			Doc:       "without token_file and tokens: generate a write token under state_dir, or none (loopback only)",
			NotSecret: "generate or none; never a token", Bind: engine.At(func(a *Admin) *string { return &a.Token })},
		engine.Field{Name: "hosts", Kind: engine.KindList, MaxItems: MaxAdminHosts, Item: &engine.Field{Kind: engine.KindString, Pattern: hostNamePattern},
			Doc: "host names the admin API accepts in Host besides IPs and localhost", Check: checkAdminHosts,
			Bind: engine.At(func(a *Admin) *[]string { return &a.Hosts })},
	)
)

// Admin configures the admin listener, which serves health, metrics and
// the admin API apart from the data plane (`admin`).
type Admin struct {
	// Listen is the admin address, "host:port" (`admin.listen`, required).
	// An empty host listens on all interfaces; port 0 asks the OS for a
	// free port. It must not bind the same non-zero port as Config.Listen
	// on an overlapping host.
	Listen string
	// TokenFile is a file holding the admin API's bearer token
	// (`admin.token_file`, optional): one line of at least 16 printable
	// characters, surrounding white space ignored, at most 4KiB. When set,
	// every admin path but /healthz and /readyz needs
	// "Authorization: Bearer TOKEN". Required when Listen's host is not
	// loopback (127.0.0.0/8, ::1, localhost) and Tokens is empty; an
	// empty host counts as not loopback. The file is read at start and on
	// every reload. Its token has scope write. Empty when omitted: no
	// token.
	TokenFile string
	// Tokens are more bearer tokens, each with a scope (`admin.tokens`,
	// optional, at most MaxAdminTokens): a read token for a metrics
	// scraper or a dashboard cannot change levee. Each file is read as
	// TokenFile is; no two files (TokenFile included) may hold the same
	// token. nil when omitted: only TokenFile, if any.
	Tokens []AdminToken
	// Token says what levee does when neither TokenFile nor Tokens is set
	// (`admin.token`, default AdminTokenGenerate): AdminTokenGenerate
	// makes a random write token once, in StateDir's AdminTokenFileName
	// (mode 0600, reused on later starts), and logs its path; reads (GET,
	// HEAD) stay open, writes need it. AdminTokenNone is the explicit
	// opt-out, an admin API open to every local caller: allowed only with
	// a loopback Listen. Refused when set together with TokenFile or
	// Tokens, which already decide the tokens.
	Token string
	// Hosts are host names (`admin.hosts`, at most MaxAdminHosts, lower
	// case, no port) the admin API accepts in a request's Host header
	// besides an IP literal and "localhost": a DNS name that points at
	// the admin listener. Any other Host is refused 421 (a DNS-rebinding
	// page names its own domain). nil when omitted: IPs and localhost
	// only.
	Hosts []string
}

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultAdminToken is Admin.Token when `admin.token` is omitted.
	DefaultAdminToken = AdminTokenGenerate
)
