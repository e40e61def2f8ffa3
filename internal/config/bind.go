package config

import (
	"cmp"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// This file reads a block's fields as its table in fields.go describes
// them: p.block checks the keys, p.bind reads every bound field (kind,
// bounds, required, empty, then the field's own check).

// checkStr returns a check of a string field from a rule on its value.
func checkStr(rule func(p *parser, path string, n *yaml.Node, s *string) bool) func(*parser, string, *yaml.Node, any) bool {
	return func(p *parser, path string, n *yaml.Node, ptr any) bool { return rule(p, path, n, ptr.(*string)) }
}

// problemOf returns a check of a string field from a function that
// returns the problem with a value ("" if none), reported as
// "<problem>, got <value>".
func problemOf(problem func(string) string) func(*parser, string, *yaml.Node, any) bool {
	return checkStr(func(p *parser, path string, n *yaml.Node, s *string) bool {
		if pr := problem(*s); pr != "" {
			p.Add(n, path, "%s, got %s", pr, engine.Quote(*s))
			return false
		}
		return true
	})
}

// The checks that several fields share.
var (
	checkListen   = checkStr(func(p *parser, path string, n *yaml.Node, s *string) bool { return p.address(path, n, *s, true) })
	checkEndpoint = checkStr(func(p *parser, path string, n *yaml.Node, s *string) bool { return p.address(path, n, *s, false) })
	checkName     = problemOf(func(s string) string {
		if validName(s) {
			return ""
		}
		return nameRule
	})
	checkZone = checkStr(func(p *parser, path string, n *yaml.Node, s *string) bool { return p.zone(path, n, *s) })
	// checkReadable refuses a file levee cannot read (checkReadableFile).
	checkReadable = checkStr(func(p *parser, path string, n *yaml.Node, s *string) bool {
		if problem := checkReadableFile(*s); problem != "" {
			p.Add(n, path, "%s", problem)
			return false
		}
		return true
	})
)

// checkDurationWithin returns a check of a duration field: lo to hi.
func checkDurationWithin(lo, hi time.Duration) func(*parser, string, *yaml.Node, any) bool {
	return func(p *parser, path string, n *yaml.Node, ptr any) bool {
		if d := *ptr.(*time.Duration); d < lo || d > hi {
			p.Add(n, path, "must be from %v to %v, got %s", lo, hi, engine.Describe(n))
			return false
		}
		return true
	}
}

// field returns b's field of that name; it panics if there is none, so
// that a misspelt name fails every test that reaches it.
func (b *block) field(name string) *field {
	for i := range b.fields {
		if b.fields[i].name == name {
			return &b.fields[i]
		}
	}
	panic("config: no field " + name)
}

// block checks that n is a mapping of b's keys (see fields). It returns
// the value node of each key set to a non-null value.
func (p *parser) block(path string, n *yaml.Node, b *block) (map[string]*yaml.Node, bool) {
	return p.fields(path, n, b.keys...)
}

// bind reads every field of b that has a bind into dst, which must be
// what b's binds take: f holds the fields set in mapping n (from
// p.block), and n positions the report of a required field that is
// omitted. A value that is invalid is reported; a value of the wrong
// kind leaves the destination as it was, one its check refuses stays
// stored. The name of each field missing or invalid is in the returned
// set, which cross-field checks consult (nil when all were valid).
func (p *parser) bind(f map[string]*yaml.Node, n *yaml.Node, path string, b *block, dst any) map[string]bool {
	var bad map[string]bool
	for i := range b.fields {
		fd := &b.fields[i]
		if fd.bind == nil {
			continue
		}
		fp, v, ok := engine.Key(path, fd.name), f[fd.name], true
		switch {
		case v != nil:
			ok = p.bindOne(fp, v, fd, fd.bind(dst))
		case fd.required:
			p.Add(n, fp, "%s", cmp.Or(fd.missing, "required"))
			ok = false
		}
		if !ok {
			if bad == nil {
				bad = make(map[string]bool)
			}
			bad[fd.name] = true
		}
	}
	return bad
}

// bindOne reads v as fd says into ptr, then applies fd.check, reporting
// whether it was valid.
func (p *parser) bindOne(path string, v *yaml.Node, fd *field, ptr any) bool {
	if !p.read(path, v, fd, ptr) {
		return false
	}
	return fd.check == nil || fd.check(p, path, v, ptr)
}

// read reads v as fd's kind says into ptr, reporting whether it was
// valid.
func (p *parser) read(path string, v *yaml.Node, fd *field, ptr any) bool {
	switch fd.kind {
	case kindEnum, kindString:
		s, ok := p.str(path, v)
		switch {
		case !ok:
			return false
		case s == "" && (fd.required || fd.nonEmpty):
			msg := "must not be empty"
			if fd.required {
				msg = "required"
			}
			p.Add(v, path, "%s", cmp.Or(fd.empty, msg))
			return false
		case fd.kind == kindEnum && !slices.Contains(fd.enum, s):
			p.Add(v, path, "must be one of %s, got %s", engine.QuotedList(fd.enum), engine.Describe(v))
			return false
		}
		*ptr.(*string) = s
		return true
	case kindInt:
		i, ok := p.integer(path, v, fd.lo, fd.hi)
		if ok {
			switch d := ptr.(type) {
			case *int:
				*d = int(i)
			case *int64:
				*d = i
			case *uint32:
				*d = uint32(i)
			default:
				panic("config: bind of " + path + " is not *int, *int64 or *uint32")
			}
		}
		return ok
	case kindNumber:
		x, ok := p.number(path, v, fd.flo, fd.fhi)
		if ok {
			*ptr.(*float64) = x
		}
		return ok
	case kindFraction:
		x, ok := p.fraction(path, v)
		if ok {
			*ptr.(*float64) = x
		}
		return ok
	case kindBool:
		b, ok := p.boolean(path, v)
		if ok {
			*ptr.(*bool) = b
		}
		return ok
	case kindDuration:
		d, ok := p.duration(path, v)
		if ok {
			*ptr.(*time.Duration) = d
		}
		return ok
	case kindSize:
		s, ok := p.size(path, v, fd.lo, fd.hi)
		if ok {
			*ptr.(*int64) = s
		}
		return ok
	case kindBlock:
		f, ok := p.block(path, v, fd.sub)
		if ok {
			ok = p.bind(f, v, path, fd.sub, ptr) == nil
		}
		return ok
	case kindList:
		// A bound list is read whole by its field's check, which bindOne
		// runs next (cluster.etcd.endpoints).
		if fd.check == nil {
			panic("config: list " + path + " is bound without a check to read it")
		}
		return true
	}
	panic("config: field " + path + " of this kind cannot be bound")
}
