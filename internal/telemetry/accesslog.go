package telemetry

import (
	"github.com/levee-gw/levee/internal/jsonstr"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// AccessEntry is one finished request as the access log records it.
// docs/configuration.md ("Access log") describes each field of the line.
type AccessEntry struct {
	Time      time.Time
	RequestID string
	TraceID   string // the incoming traceparent's trace id (TraceIDOf); "" when none
	Client    string // remote address as the listener saw it
	Method    string
	Host      string
	Path      string
	Query     string // the raw query string; values of AccessOptions.RedactQuery keys are redacted when formatted
	Proto     string
	UserAgent string
	Status    int
	Route     string
	Upstream  string
	Endpoint  string
	Reason    string // levee's refusal reason, or "" when the upstream answered
	// UpstreamStatus is the status the last attempt's endpoint answered;
	// 0 when none did. It differs from Status when levee replaced the
	// answer (an unasked protocol switch, a per-try timeout at the head).
	UpstreamStatus int
	BytesIn        int64 // request body bytes read from the client
	BytesOut       int64 // response body bytes written, levee's own refusals included
	Duration       time.Duration
	// Connect is the last attempt's time to dial its connection, 0 when
	// it reused a pooled one; FirstByte its time from starting to send
	// the request to the first byte of the answer (0: no answer).
	Connect, FirstByte time.Duration
	Attempts           int    // tries sent upstream (more than 1 after retries); 0 when none
	App                string // the authenticated app's id; "" when none
	// TLSClientSubject and TLSClientSHA256 are the verified client
	// certificate's subject (RFC 2253) and the hex SHA-256 of its DER
	// (certset.Client); "" when the client sent none (or clear text).
	TLSClientSubject, TLSClientSHA256 string
}

// AccessOptions configure an AccessLog.
type AccessOptions struct {
	// Writer receives the lines when Path is empty (os.Stderr when nil).
	Writer io.Writer
	// Path, when set, is a file the lines are appended to (created 0640
	// when missing) and that Reopen opens again by name, for logrotate's
	// move-then-signal.
	Path string
	// Sample2xx is the share of 2xx lines kept, from 0 (none) to 1 (all);
	// every other status is always logged.
	Sample2xx float64
	// RedactQuery are the query keys (compared case-insensitively, after
	// percent-decoding) whose values are logged as REDACTED.
	RedactQuery []string
	// Logger receives the errors of reopening Path (nil: discard).
	Logger *slog.Logger
	// Dropped, when set, counts the dropped lines (NewAccessLogDropped),
	// and NewAccessLog registers nothing: a log rebuilt on reload shares
	// the process's counter. nil: NewAccessLog makes and registers one.
	Dropped prometheus.Counter
}

// AccessLog writes one JSON line per request on its own goroutine, so a slow
// log destination never slows a request. A request appends its line to a
// shared buffer under a mutex and wakes nobody: the writer takes the
// buffer every FlushEvery, or at once when it holds FlushBytes, and writes
// it in one call. (Handing each line over a channel woke the writer and
// made one write per request whenever traffic was not dense enough to
// queue: about 10 µs of CPU per request in proxy-compare.) At most
// MaxPending bytes wait; beyond them a line is dropped and counted in
// levee_access_log_dropped_total instead of blocking the request. Safe for
// concurrent use. Start it with Run; Log before Run only buffers.
type AccessLog struct {
	w       io.Writer
	file    *os.File // the open Path, owned by Run after NewAccessLog; nil for a Writer
	path    string
	logger  *slog.Logger
	mu      sync.Mutex
	pending []byte        // lines not yet taken by Run, guarded by mu; at most MaxPending bytes
	spare   []byte        // Run's buffer, swapped with pending (Run's alone)
	full    chan struct{} // pending reached FlushBytes (capacity 1)
	stop    chan struct{} // closed by Close
	reopen  chan struct{} // one pending reopen at most (capacity 1)
	reopens atomic.Uint64 // reopens attempted by Run, for reopened
	pool    sync.Pool
	stamp   atomic.Pointer[stamp] // the last second formatted (appendTime)
	dropped prometheus.Counter
	done    chan struct{}
	// keep2xx is Sample2xx as a threshold on a random uint64; all2xx
	// when every 2xx line is kept.
	keep2xx uint64
	all2xx  bool
	redact  []string

	// closed (guarded by mu) is set by Close and Retire before Run's last
	// flush: a line queued before it is written by that flush; one logged
	// after it goes to successor (guarded by mu; nil: not written).
	closed    bool
	successor *AccessLog
}

// The writer's rhythm and bound.
const (
	// FlushEvery is the longest a line waits in memory before Run writes
	// it (NGINX's access_log flush= is the same idea).
	FlushEvery = 50 * time.Millisecond
	// FlushBytes of waiting lines are written at once, without waiting
	// for the tick.
	FlushBytes = 64 << 10
	// MaxPending bounds the bytes waiting to be written (a stalled
	// destination): lines beyond it are dropped and counted.
	MaxPending = 4 << 20
)

// NewAccessLogDropped returns levee_access_log_dropped_total, registered
// into reg, for AccessOptions.Dropped: registered once per process, it
// outlives the access logs a reload replaces.
func NewAccessLogDropped(reg prometheus.Registerer) (prometheus.Counter, error) {
	c := newDropped()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return c, nil
}

func newDropped() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "levee_access_log_dropped_total",
		Help: "Access log lines dropped because the log writer fell behind.",
	})
}

// NewAccessLog returns an access log as o says, registering its counter
// into reg unless o.Dropped is set (reg is unused then). With o.Path it
// opens the file now, so that a path levee cannot write is an error at
// start (or fails the reload that asks for it).
func NewAccessLog(o AccessOptions, reg prometheus.Registerer) (*AccessLog, error) {
	a := &AccessLog{
		w:       o.Writer,
		path:    o.Path,
		logger:  o.Logger,
		full:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		reopen:  make(chan struct{}, 1),
		dropped: o.Dropped,
		done:    make(chan struct{}),
		redact:  o.RedactQuery,
	}
	if a.w == nil {
		a.w = os.Stderr
	}
	if a.logger == nil {
		a.logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Sample2xx >= 1:
		a.all2xx = true
	case o.Sample2xx > 0:
		a.keep2xx = uint64(math.Ldexp(o.Sample2xx, 64))
	}
	a.pool.New = func() any { b := make([]byte, 0, 512); return &b }
	if a.path != "" {
		f, err := openLogFile(a.path)
		if err != nil {
			return nil, err
		}
		a.file, a.w = f, f
	}
	if a.dropped == nil {
		a.dropped = newDropped()
		if err := reg.Register(a.dropped); err != nil {
			if a.file != nil {
				_ = a.file.Close()
			}
			return nil, err
		}
	}
	return a, nil
}

func openLogFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
}

// sampled reports whether a line of this status is kept: always unless
// it is a 2xx, then with the Sample2xx chance. No lock: math/rand/v2's
// top-level generator is per-thread.
func (a *AccessLog) sampled(status int) bool {
	if a.all2xx || status < 200 || status > 299 {
		return true
	}
	return a.keep2xx != 0 && rand.Uint64() < a.keep2xx
}

// Log formats e and queues it, unless sampling leaves it out. It never
// blocks.
func (a *AccessLog) Log(e *AccessEntry) {
	if !a.sampled(e.Status) {
		return
	}
	bp := a.pool.Get().(*[]byte)
	b := (*bp)[:0]
	b = append(b, `{"time":"`...)
	b = a.appendTime(b, e.Time)
	b = append(b, `","request_id":`...)
	b = AppendJSONString(b, e.RequestID)
	if e.TraceID != "" {
		b = append(b, `,"trace_id":`...)
		b = AppendJSONString(b, e.TraceID)
	}
	b = append(b, `,"client":`...)
	b = AppendJSONString(b, e.Client)
	b = append(b, `,"method":`...)
	b = AppendJSONString(b, e.Method)
	b = append(b, `,"host":`...)
	b = AppendJSONString(b, e.Host)
	b = append(b, `,"path":`...)
	b = AppendJSONString(b, e.Path)
	if e.Query != "" {
		b = append(b, `,"query":`...)
		b = appendQuery(b, e.Query, a.redact)
	}
	b = append(b, `,"proto":`...)
	b = AppendJSONString(b, e.Proto)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	if e.UpstreamStatus != 0 {
		b = append(b, `,"upstream_status":`...)
		b = strconv.AppendInt(b, int64(e.UpstreamStatus), 10)
	}
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
	if e.TLSClientSubject != "" || e.TLSClientSHA256 != "" {
		b = append(b, `,"tls_client_subject":`...)
		b = AppendJSONString(b, e.TLSClientSubject)
		b = append(b, `,"tls_client_sha256":`...)
		b = AppendJSONString(b, e.TLSClientSHA256)
	}
	if e.Attempts > 1 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(e.Attempts), 10)
	}
	b = append(b, `,"bytes_in":`...)
	b = strconv.AppendInt(b, e.BytesIn, 10)
	b = append(b, `,"bytes_out":`...)
	b = strconv.AppendInt(b, e.BytesOut, 10)
	b = append(b, `,"duration_ms":`...)
	b = appendMillis(b, e.Duration)
	if e.Attempts > 0 {
		b = append(b, `,"upstream_connect_ms":`...)
		b = appendMillis(b, e.Connect)
		b = append(b, `,"upstream_first_byte_ms":`...)
		b = appendMillis(b, e.FirstByte)
	}
	if e.UserAgent != "" {
		b = append(b, `,"user_agent":`...)
		b = AppendJSONString(b, e.UserAgent)
	}
	b = append(b, "}\n"...)
	*bp = b
	a.queue(b)
	a.recycle(bp)
}

// queue appends the formatted line b to pending, or hands it to the
// successor once the log is closed (a request that loaded this log before
// a reload swapped it, ending after Retire). The chain of successors is
// as long as the reloads that replaced a log while such a request ran.
func (a *AccessLog) queue(b []byte) {
	a.mu.Lock()
	if a.closed {
		next := a.successor
		a.mu.Unlock()
		if next != nil {
			next.queue(b)
		}
		return
	}
	n := len(a.pending) + len(b)
	fits := n <= MaxPending
	if fits {
		a.pending = append(a.pending, b...)
	}
	a.mu.Unlock()
	switch {
	case !fits:
		a.dropped.Inc()
	case n >= FlushBytes && n-len(b) < FlushBytes: // this line crossed the mark: wake Run once
		select {
		case a.full <- struct{}{}:
		default:
		}
	}
}

// appendMillis appends d in milliseconds with microsecond precision, as
// strconv.AppendFloat(b, µs/1000, 'f', 3, 64) would (TestAppendMillis),
// in integer arithmetic: a third of the cost, and exact past 2^53 µs.
func appendMillis(b []byte, d time.Duration) []byte {
	us := d.Microseconds()
	u := uint64(us)
	if us < 0 {
		b = append(b, '-')
		u = -u // two's complement: right for math.MinInt64 too
	}
	b = strconv.AppendUint(b, u/1000, 10)
	f := u % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

// stamp is one second of time, formatted as RFC 3339 without its
// fraction and zone ("2006-01-02T15:04:05"), in UTC.
type stamp struct {
	unix int64
	text []byte
}

// appendTime appends t in UTC as time.RFC3339Nano formats it
// (TestAppendTime): the second's text comes from a one-entry cache, which
// every line of the same second shares, and only the fraction is formatted
// per line (AppendFormat costs about as much as the rest of the line).
func (a *AccessLog) appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	sec := t.Unix()
	st := a.stamp.Load()
	if st == nil || st.unix != sec {
		st = &stamp{unix: sec, text: t.AppendFormat(nil, "2006-01-02T15:04:05")}
		a.stamp.Store(st)
	}
	b = append(b, st.text...)
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i >= 1; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for frac[n-1] == '0' { // ns != 0: a non-zero digit stops it
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, 'Z')
}

// Reopen asks Run to close the log file and open Path again (after
// logrotate moved it away); lines queued meanwhile go to the new file. It
// never blocks: a reopen already pending covers this one. A log without
// Path ignores it.
func (a *AccessLog) Reopen() {
	select {
	case a.reopen <- struct{}{}:
	default:
	}
}

// reopened returns how many reopens Run has carried out (tests wait on it).
func (a *AccessLog) reopened() uint64 { return a.reopens.Load() }

// Run writes the waiting lines every FlushEvery, or as soon as FlushBytes
// wait, until Close, and reopens the file when Reopen asks (on this
// goroutine, so a slow open never holds a request).
func (a *AccessLog) Run() {
	defer close(a.done)
	tick := time.NewTicker(FlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			a.flush()
		case <-a.full:
			a.flush()
		case <-a.reopen:
			a.flush()
			a.reopenFile()
			a.reopens.Add(1)
		case <-a.stop:
			a.flush()
			a.closeFile()
			return
		}
	}
}

// flush takes the waiting lines and writes them in one call (Run's
// goroutine only). A write error is not retried: the lines are lost, as a
// full disk would lose them.
func (a *AccessLog) flush() {
	a.mu.Lock()
	out := a.pending
	a.pending = a.spare[:0]
	a.mu.Unlock()
	if len(out) > 0 {
		_, _ = a.w.Write(out)
	}
	if cap(out) > FlushBytes*4 { // do not keep a burst's buffer alive
		out = nil
	}
	a.spare = out
}

// reopenFile opens Path anew and writes to it from now on. When the open
// fails the old file stays in use (its lines are not lost; the operator
// sees the error and can signal again).
func (a *AccessLog) reopenFile() {
	if a.path == "" {
		return
	}
	f, err := openLogFile(a.path)
	if err != nil {
		a.logger.Error("access log: reopen failed; still writing to the file open before", "path", a.path, "error", err)
		return
	}
	a.closeFile()
	a.file, a.w = f, f
	a.logger.Info("access log reopened", "path", a.path)
}

func (a *AccessLog) closeFile() {
	if a.file != nil {
		if err := a.file.Close(); err != nil {
			a.logger.Error("access log: close failed", "path", a.path, "error", err)
		}
		a.file = nil
	}
}

func (a *AccessLog) recycle(bp *[]byte) {
	if cap(*bp) <= 4096 { // do not keep the rare huge line's buffer alive
		a.pool.Put(bp)
	}
}

// Close writes the lines logged so far, closes the file and waits for Run
// to return. It must be called at most once (Close or Retire), and only
// after Run was started. Lines logged after Close are never written (a
// straggling request after a forced shutdown must not crash the process).
func (a *AccessLog) Close() { a.Retire(nil) }

// Retire is Close for a log a reload replaced with next (nil: the access
// log was turned off): every line queued before it is written here, to
// this log's destination, and the lines of requests that still hold this
// log and end later are queued on next instead, so none is lost.
func (a *AccessLog) Retire(next *AccessLog) {
	a.mu.Lock()
	a.closed, a.successor = true, next
	a.mu.Unlock()
	close(a.stop)
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
	b = append(b, '"')
	b = jsonstr.AppendEscaped(b, s)
	return append(b, '"')
}
