package telemetry

import (
	"bufio"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// AccessEntry is one finished request as the access log records it.
type AccessEntry struct {
	Time      time.Time
	RequestID string
	Client    string // remote address as the listener saw it
	Method    string
	Host      string
	Path      string
	Proto     string
	Status    int
	Route     string
	Upstream  string
	Endpoint  string
	Reason    string // levee's refusal reason, or "" when the upstream answered
	BytesOut  int64
	Duration  time.Duration
	Attempts  int    // tries sent upstream (more than 1 after retries); 0 when none
	App       string // the authenticated app's id; "" when none
}

// AccessLog writes one JSON line per request on its own goroutine, so a slow
// log destination never slows a request. Lines wait in a queue of at most
// QueueLen entries; when it is full a line is dropped and counted in
// levee_access_log_dropped_total instead of blocking the request. Safe for
// concurrent use. Start it with Run; Log before Run only queues.
type AccessLog struct {
	w       io.Writer
	queue   chan *[]byte
	pool    sync.Pool
	dropped prometheus.Counter
	done    chan struct{}
}

// QueueLen bounds the lines waiting to be written.
const QueueLen = 8192

// NewAccessLog returns an access log writing to w, registering its counter
// into reg.
func NewAccessLog(w io.Writer, reg prometheus.Registerer) (*AccessLog, error) {
	a := &AccessLog{
		w:     w,
		queue: make(chan *[]byte, QueueLen),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "levee_access_log_dropped_total",
			Help: "Access log lines dropped because the log writer fell behind.",
		}),
		done: make(chan struct{}),
	}
	a.pool.New = func() any { b := make([]byte, 0, 512); return &b }
	if err := reg.Register(a.dropped); err != nil {
		return nil, err
	}
	return a, nil
}

// Log formats e and queues it. It never blocks.
func (a *AccessLog) Log(e *AccessEntry) {
	bp := a.pool.Get().(*[]byte)
	b := (*bp)[:0]
	b = append(b, `{"time":"`...)
	b = e.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","request_id":`...)
	b = AppendJSONString(b, e.RequestID)
	b = append(b, `,"client":`...)
	b = AppendJSONString(b, e.Client)
	b = append(b, `,"method":`...)
	b = AppendJSONString(b, e.Method)
	b = append(b, `,"host":`...)
	b = AppendJSONString(b, e.Host)
	b = append(b, `,"path":`...)
	b = AppendJSONString(b, e.Path)
	b = append(b, `,"proto":`...)
	b = AppendJSONString(b, e.Proto)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"route":`...)
	b = AppendJSONString(b, e.Route)
	b = append(b, `,"upstream":`...)
	b = AppendJSONString(b, e.Upstream)
	b = append(b, `,"endpoint":`...)
	b = AppendJSONString(b, e.Endpoint)
	if e.Reason != "" {
		b = append(b, `,"reason":`...)
		b = AppendJSONString(b, e.Reason)
	}
	if e.App != "" {
		b = append(b, `,"app":`...)
		b = AppendJSONString(b, e.App)
	}
	if e.Attempts > 1 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(e.Attempts), 10)
	}
	b = append(b, `,"bytes_out":`...)
	b = strconv.AppendInt(b, e.BytesOut, 10)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendFloat(b, float64(e.Duration.Microseconds())/1000, 'f', 3, 64)
	b = append(b, "}\n"...)
	*bp = b
	select {
	case a.queue <- bp:
	default:
		a.dropped.Inc()
		a.pool.Put(bp)
	}
}

// Run writes queued lines until Close. It batches lines through a buffer and
// flushes whenever the queue is momentarily empty.
func (a *AccessLog) Run() {
	defer close(a.done)
	bw := bufio.NewWriterSize(a.w, 64<<10)
	for bp := range a.queue {
		if bp == nil { // Close's stop marker
			break
		}
		_, _ = bw.Write(*bp)
		a.recycle(bp)
		if len(a.queue) == 0 {
			_ = bw.Flush()
		}
	}
	_ = bw.Flush()
}

func (a *AccessLog) recycle(bp *[]byte) {
	if cap(*bp) <= 4096 { // do not keep the rare huge line's buffer alive
		a.pool.Put(bp)
	}
}

// Close writes the lines queued so far and waits for Run to return. It must
// be called at most once, and only after Run was started. Lines logged after
// Close are dropped (a straggling request after a forced shutdown must not
// crash the process, so the queue is never closed).
func (a *AccessLog) Close() {
	a.queue <- nil
	<-a.done
}

// maxLoggedString bounds each logged field, so a 64 KiB path cannot make a
// 64 KiB log line.
const maxLoggedString = 2048

// AppendJSONString appends s as a JSON string, escaping what JSON requires
// and replacing invalid UTF-8, truncated to maxLoggedString bytes.
func AppendJSONString(b []byte, s string) []byte {
	if len(s) > maxLoggedString {
		s = s[:maxLoggedString]
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
