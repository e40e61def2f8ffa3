package gateway

import (
	"io"
	"log/slog"
	"os"
	"slices"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/telemetry"
	"github.com/prometheus/client_golang/prometheus"
)

// newAccessLog builds the access log l asks for; nil when it is off.
// "stderr" is out (Options.LogOutput, where the structured log goes too);
// a file is opened now, so that a path levee cannot write fails the start
// (or the reload that asks for it). Every log counts its drops in dropped,
// registered once per process (obsState).
func newAccessLog(l config.Log, out io.Writer, logger *slog.Logger, dropped prometheus.Counter) (*telemetry.AccessLog, error) {
	if !l.Access {
		return nil, nil
	}
	o := telemetry.AccessOptions{Writer: out, Sample2xx: l.AccessLog.Sample2xx, RedactQuery: l.AccessLog.RedactQuery, Logger: logger, Dropped: dropped}
	switch l.AccessLog.Output {
	case "stderr", "":
	case "stdout":
		o.Writer = os.Stdout
	default:
		o.Path = l.AccessLog.Output
	}
	return telemetry.NewAccessLog(o, nil)
}

// ReopenAccessLog asks the access log serving now to reopen its file
// (levee run does on SIGUSR1, after logrotate moved the file away). It
// returns at once: the log's own goroutine reopens, between two lines.
// Without an access log, or with one that writes to stdout or stderr, it
// does nothing.
func (g *Gateway) ReopenAccessLog() {
	if al := g.handler.AccessLog(); al != nil {
		al.Reopen()
	}
}

// sameAccessLog reports whether a and b configure the same access log
// (a reload that keeps it keeps the log, its open file and its buffer).
func sameAccessLog(a, b config.Log) bool {
	return a.Access == b.Access && a.AccessLog.Output == b.AccessLog.Output &&
		a.AccessLog.Sample2xx == b.AccessLog.Sample2xx && slices.Equal(a.AccessLog.RedactQuery, b.AccessLog.RedactQuery)
}
