package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// AccessLog configures the access log (`log.access` written as a block,
// which turns the log on). docs/configuration.md ("Access log") lists the
// line's fields.
type AccessLog struct {
	// Output is where the lines go (`output`): "stderr", "stdout", or the
	// path of a file they are appended to (created when missing, in a
	// directory that must exist; relative to the working directory), which
	// levee reopens on SIGUSR1 for logrotate. Default
	// DefaultAccessLogOutput ("stderr").
	Output string
	// Sample2xx is the share of requests answered 2xx that are logged
	// (`sample_2xx`, 0 to 1); every other status is always logged. Default
	// DefaultAccessLogSample2xx (1, all); 0 logs no 2xx.
	Sample2xx float64
	// RedactQuery are query keys whose values the log writes as REDACTED
	// (`redact_query`, at most MaxRedactQuery keys, each 1 to 128 bytes;
	// compared case-insensitively after percent-decoding). Default none.
	RedactQuery []string
}

// MaxRedactQuery bounds log.access.redact_query (each logged query is
// compared against every key).
const MaxRedactQuery = 64

// maxRedactKey bounds one redact_query key.
const maxRedactKey = 128

func defaultAccessLog() AccessLog {
	return *engine.WithDefaults(accessLogBlock, &AccessLog{})
}

var accessLogBlock = engine.NewBlock(
	engine.Field{Name: "output", Kind: engine.KindString, NonEmpty: true, Def: DefaultAccessLogOutput,
		Doc:   `"stderr", "stdout", or a file (appended to; reopened on SIGUSR1)`,
		Check: checkLogOutput, Bind: engine.At(func(a *AccessLog) *string { return &a.Output })},
	engine.Field{Name: "sample_2xx", Kind: engine.KindNumber, Flo: 0, Fhi: 1, Def: DefaultAccessLogSample2xx,
		Doc:  "share of 2xx answers logged, 0 to 1; other statuses are always logged",
		Bind: engine.At(func(a *AccessLog) *float64 { return &a.Sample2xx })},
	engine.Field{Name: "redact_query", Kind: engine.KindList, MaxItems: MaxRedactQuery, Item: &engine.Field{Kind: engine.KindString},
		Doc: "query keys whose values are logged as REDACTED"},
)

// checkLogOutput accepts "stdout", "stderr", or a file path whose
// directory exists and which, when it exists, is a regular file levee can
// open for writing (so that `levee validate` refuses what `levee run`
// could not open; it creates nothing). A missing file's directory is not
// checked for write permission (no portable way without creating one).
var checkLogOutput = engine.ProblemOf(func(s string) string {
	if s == "stdout" || s == "stderr" {
		return ""
	}
	dir := filepath.Dir(s)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return `must be "stdout", "stderr" or a file in an existing directory; ` + engine.Quote(dir) + " is not a directory"
	}
	st, err := os.Stat(s)
	switch {
	case err != nil:
		return "" // created at start
	case st.IsDir():
		return `must be "stdout", "stderr" or a file, not a directory`
	case !st.Mode().IsRegular():
		return `must be "stdout", "stderr" or a regular file`
	}
	f, err := os.OpenFile(s, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Sprintf("cannot write to the file: %v", pathErrCause(err))
	}
	f.Close()
	return ""
})

// accessLog reads `log.access` written as a block.
func (p *parser) accessLog(a *AccessLog, n *yaml.Node) {
	const path = "log.access"
	f, ok := p.Block(path, n, accessLogBlock)
	if !ok {
		return
	}
	p.Bind(f, n, path, accessLogBlock, a) // output and sample_2xx
	v := f["redact_query"]
	if v == nil {
		return
	}
	rp := engine.Key(path, "redact_query")
	items, ok := p.Sequence(rp, v)
	if !ok {
		return
	}
	if len(items) > MaxRedactQuery {
		p.Add(v, rp, "at most %d keys, got %d", MaxRedactQuery, len(items))
		return
	}
	for i, item := range items {
		ip := engine.Index(rp, i)
		s, ok := p.Str(ip, item)
		switch {
		case !ok:
		case s == "" || len(s) > maxRedactKey:
			p.Add(item, ip, "must be a query key of 1 to %d bytes, got %s", maxRedactKey, engine.Describe(item))
		case containsFold(a.RedactQuery, s):
			p.Add(item, ip, "duplicate key %s", engine.Quote(s))
		default:
			a.RedactQuery = append(a.RedactQuery, s)
		}
	}
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

const (
	// DefaultAccessLogOutput is AccessLog.Output when omitted.
	DefaultAccessLogOutput = "stderr"
	// DefaultAccessLogSample2xx is AccessLog.Sample2xx when omitted.
	DefaultAccessLogSample2xx = 1.0
)
