// Two shapes several blocks share: a list of distinct, normalised strings,
// and a value template with ${variable} parts.

package config

import (
	"slices"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// distinctStrings reads items (the elements of the sequence at path) as
// strings, each turned into its stored form by norm or refused with
// norm's problem (a whole message, which names the input itself), no two
// equal after norm: a repeat is refused as "duplicate NOUN V (first at
// LIST[i])", LIST the path's last key. It returns the stored values in
// order and whether every item was good. Bounded by len(items), which
// each caller has capped.
func distinctStrings(p *engine.Parser, path string, items []*yaml.Node, noun string, norm func(s string) (v, problem string)) ([]string, bool) {
	list := path[strings.LastIndexByte(path, '.')+1:]
	out := make([]string, 0, len(items))
	first := make(map[string]int, len(items))
	good := true
	for i, item := range items {
		ip := engine.Index(path, i)
		s, ok := p.Str(ip, item)
		if !ok {
			good = false
			continue
		}
		v, problem := norm(s)
		if problem != "" {
			p.Add(item, ip, "%s", problem)
			good = false
			continue
		}
		if j, dup := first[v]; dup {
			p.Add(item, ip, "duplicate %s%s (first at %s[%d])", noun, engine.Quote(v), list, j)
			good = false
			continue
		}
		first[v] = i
		out = append(out, v)
	}
	return out, good
}

// splitTemplate splits a value template into literal and variable parts,
// alternating, the first literal (a variable part holds the variable's
// name): "a${route}b" is ["a", "route", "b"]. problem names an unclosed or
// unknown variable (vars are the known ones, listed as known). Each turn
// consumes at least three bytes, so the loop is bounded by len(s).
func splitTemplate(s string, vars []string, known string) (parts []string, problem string) {
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			return append(parts, s), ""
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return nil, "has \"${\" without a closing \"}\""
		}
		name := s[i+2 : i+2+end]
		if !slices.Contains(vars, name) {
			return nil, "uses unknown variable " + engine.Quote("${"+name+"}") + " (known: " + known + ")"
		}
		parts = append(parts, s[:i], name)
		s = s[i+2+end+1:]
	}
}
