package config

import (
	"fmt"
	"regexp"
	"slices"

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
func checkAdminHosts(p *parser, path string, n *yaml.Node, ptr any) bool {
	items, ok := p.sequence(path, n)
	if !ok {
		return false
	}
	if len(items) > MaxAdminHosts {
		p.add(n, path, "at most %d host names, got %d", MaxAdminHosts, len(items))
		return false
	}
	var hosts []string
	for i, item := range items {
		ip := index(path, i)
		s, sok := p.str(ip, item)
		switch {
		case !sok:
			ok = false
		case !hostNameRE.MatchString(s):
			p.add(item, ip, "must be a host name in lower case without port (labels of a-z, 0-9 and inner \"-\", at most 63 each), got %s", quote(s))
			ok = false
		case slices.Contains(hosts, s):
			p.add(item, ip, "duplicate host %s", quote(s))
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
	items, ok := p.sequence(path, n)
	if !ok {
		return false
	}
	if len(items) > MaxAdminTokens {
		p.add(n, path, "at most %d tokens, got %d", MaxAdminTokens, len(items))
		return false
	}
	ok = true
	files := map[string]int{}
	var fileNodes []*yaml.Node
	for i, item := range items {
		ip := index(path, i)
		if item.Kind == yaml.AliasNode {
			ok = false
			continue
		}
		if isNull(item) || item.Kind != yaml.MappingNode {
			p.add(item, ip, "must be a mapping {file, scope}, got %s", describe(item))
			ok = false
			continue
		}
		f, fok := p.block(ip, item, adminTokenBlock)
		if !fok {
			ok = false
			continue
		}
		var t AdminToken
		if p.bind(f, item, ip, adminTokenBlock, &t) != nil { // file and scope
			ok = false
			continue
		}
		fv := f["file"]
		if j, dup := files[t.File]; dup {
			p.add(fv, key(ip, "file"), "duplicate file %s (first at admin.tokens[%d])", quote(t.File), j)
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
		p.add(fileNodes[i], e.Path, "%s", e.Message)
	}
	return ok
}

// checkTokenFile refuses an admin token file that cannot be read as the
// gateway will read it (ReadTokenFile).
func checkTokenFile(p *parser, path string, n *yaml.Node, ptr any) bool {
	if _, err := ReadTokenFile(*ptr.(*string)); err != nil {
		p.add(n, path, "%v", err)
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
	f, ok := p.block("admin", n, adminBlock)
	if !ok {
		return
	}
	bad := p.bind(f, parent, "admin", adminBlock, &c.Admin) // listen and token_file
	// A token_file that is not a string names no file, yet one was
	// meant: the loopback rule below then says nothing.
	tokenOK := !bad["token_file"] || isString(f["token_file"])
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
		p.add(v, "admin.token_file", "required when admin.listen is not a loopback address (127.0.0.0/8, ::1, localhost), got admin.listen %s", quote(s))
	}
	if tv != nil && !bad["token"] {
		switch {
		case f["token_file"] != nil || f["tokens"] != nil:
			p.add(tv, "admin.token", "applies only without admin.token_file and admin.tokens (they set the tokens), got %s", quote(c.Admin.Token))
		case explicitNone && !isLoopbackListen(s):
			p.add(tv, "admin.token", "%s (no token) is allowed only with a loopback admin.listen (127.0.0.0/8, ::1, localhost), got admin.listen %s; set admin.token_file or admin.tokens instead", quote(AdminTokenNone), quote(s))
		}
	}
	if listenOK && sameBinding(s, c.Listen) {
		p.add(v, "admin.listen", "must not bind the same port as listen (%q), got %q", c.Listen, s)
	}
}
