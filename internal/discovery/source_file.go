package discovery

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Defaults for FileOptions' zero fields.
const (
	DefaultFilePoll     = time.Second
	DefaultFileDebounce = 50 * time.Millisecond
	// fileMaxWaitFactor bounds how long a file that keeps changing is left
	// unread: Debounce × this.
	fileMaxWaitFactor = 20
)

// FileOptions configures a FileSource. The zero value means every default.
type FileOptions struct {
	// Poll is how often the file is stat'ed (size, mtime, inode), in case a
	// file-system notification is lost or unsupported (network file
	// systems, a Kubernetes ConfigMap's symlink swap, a full inotify
	// queue). 0 means DefaultFilePoll (1s); negative is an error.
	Poll time.Duration
	// Debounce is how long the file must stay unchanged after a change
	// before it is read, so a file being written is parsed only once
	// complete. A file that keeps changing is read anyway after
	// 20×Debounce. An invalid result is delivered only if the file is still
	// unchanged one Debounce later. 0 means DefaultFileDebounce (50ms);
	// negative is an error.
	Debounce time.Duration
	// Limits bound the payload (MaxPayloadBytes also bounds the read).
	Limits Limits
}

// FileSource watches a JSON file holding an array of instances (the format
// of ParseList). It watches the file's directory with fsnotify, so an
// atomic rename into place is seen, and stats the file every Poll as a
// fallback. After a change it waits until the file has been quiet for
// Debounce, reads at most Limits.MaxPayloadBytes+1 bytes, and delivers
// only when the content differs from the last delivery: an identical
// rewrite delivers nothing, and a bad or missing file delivers one Event
// with Err per distinct content (not one per poll).
//
// A FileSource is immutable; Run may be called again after it returns, but
// not concurrently (each Run delivers the current state first).
type FileSource struct {
	path, dir, base string
	name            string
	o               FileOptions
	// noNotify makes Run rely on the stat poll alone (tests).
	noNotify bool
	// onCheck, when set (tests), is called after each read of the file
	// with whether it delivered.
	onCheck func(delivered bool)
}

var _ Source = (*FileSource)(nil)

// NewFileSource checks o and returns a source for path. It starts nothing;
// the file need not exist yet.
func NewFileSource(path string, o FileOptions) (*FileSource, error) {
	if path == "" {
		return nil, errors.New("discovery: file source: path is empty")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("discovery: file source %q: %w", path, err)
	}
	var errs []error
	if o.Poll < 0 {
		errs = append(errs, fmt.Errorf("poll must be 0 (default) or more, got %v", o.Poll))
	}
	if o.Debounce < 0 {
		errs = append(errs, fmt.Errorf("debounce must be 0 (default) or more, got %v", o.Debounce))
	}
	if o.Poll == 0 {
		o.Poll = DefaultFilePoll
	}
	if o.Debounce == 0 {
		o.Debounce = DefaultFileDebounce
	}
	l, err := o.Limits.resolve()
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("discovery: file source %s: %w", abs, errors.Join(errs...))
	}
	o.Limits = l
	return &FileSource{path: abs, dir: filepath.Dir(abs), base: filepath.Base(abs), name: "file:" + abs, o: o}, nil
}

// Name is the Event.Source of this source's events: "file:" and the
// absolute path.
func (s *FileSource) Name() string { return s.name }

// Run reads the file, delivers its state, and then delivers each new state
// until ctx is done. It returns nil. It blocks; see Source.
func (s *FileSource) Run(ctx context.Context, deliver func(Event)) error {
	r := &fileRun{s: s, deliver: deliver, timer: newStoppedTimer()}
	defer r.timer.Stop()

	var (
		w       *fsnotify.Watcher
		events  <-chan fsnotify.Event
		errs    <-chan error
		watched bool
	)
	if !s.noNotify {
		// Without a watcher (inotify instances exhausted) the poll still
		// sees every change, within Poll.
		if nw, err := fsnotify.NewWatcher(); err == nil {
			w = nw
			defer w.Close()
			events, errs = w.Events, w.Errors
			watched = w.Add(s.dir) == nil
		}
	}
	poll := time.NewTicker(s.o.Poll)
	defer poll.Stop()

	r.check()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Name == s.dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				watched = false // re-added by the poll once the directory is back
			}
			if filepath.Base(ev.Name) == s.base {
				r.noteChange(time.Now())
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				r.noteChange(time.Now()) // events were lost: look again
			}
		case <-poll.C:
			if w != nil && !watched {
				watched = w.Add(s.dir) == nil
			}
			if sig := statFile(s.path); sig != r.seen {
				r.seen = sig
				r.noteChange(time.Now())
			}
		case <-r.timer.C:
			r.onTimer(time.Now())
		}
	}
}

// fileSig is what the poll compares: a change in any field is a change of
// the file (or of what the path points to).
type fileSig struct {
	exists     bool
	size       int64
	mtime      int64
	ino, dev   uint64
	statFailed string
}

func statFile(path string) fileSig {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fileSig{}
		}
		return fileSig{statFailed: err.Error()}
	}
	sig := fileSig{exists: true, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		sig.ino, sig.dev = st.Ino, uint64(st.Dev)
	}
	return sig
}

// fileRun is one Run's state, owned by its goroutine.
type fileRun struct {
	s       *FileSource
	deliver func(Event)
	// timer is the single timer of the run: the quiet-period wait or the
	// confirmation of an invalid result.
	timer *time.Timer
	armed bool

	// dirty: a change was seen since the last read; firstChange and
	// lastChange bound the quiet-period wait.
	dirty                   bool
	firstChange, lastChange time.Time

	// confirmKey is set while an invalid result waits one more Debounce to
	// prove the file is not still being written.
	confirming bool
	confirmKey string

	// seen is the file's stat at the last read or poll-detected change.
	seen fileSig
	// lastKey identifies the last delivered content ("" before the first).
	lastKey string
}

func (r *fileRun) arm(d time.Duration) {
	r.timer.Reset(d)
	r.armed = true
}

func (r *fileRun) noteChange(now time.Time) {
	if !r.dirty {
		r.dirty = true
		r.firstChange = now
	}
	r.lastChange = now
	r.confirming = false
	if !r.armed {
		r.arm(r.s.o.Debounce)
	}
}

func (r *fileRun) onTimer(now time.Time) {
	r.armed = false
	if r.dirty {
		quiet := now.Sub(r.lastChange)
		if quiet < r.s.o.Debounce && now.Sub(r.firstChange) < fileMaxWaitFactor*r.s.o.Debounce {
			r.arm(r.s.o.Debounce - quiet)
			return
		}
		r.dirty = false
		r.check()
		return
	}
	if r.confirming {
		r.check()
	}
}

// check reads the file and delivers its state if it differs from the last
// delivery. An invalid state is delivered only when a second read one
// Debounce later finds the same content (the writer was not mid-write).
func (r *fileRun) check() {
	delivered := r.checkOnce()
	if r.s.onCheck != nil {
		r.s.onCheck(delivered)
	}
}

func (r *fileRun) checkOnce() bool {
	r.seen = statFile(r.s.path)
	key, ev := r.load()
	if key == r.lastKey {
		r.confirming = false
		return false
	}
	if ev.Err != nil && !(r.confirming && r.confirmKey == key) {
		r.confirming, r.confirmKey = true, key
		r.arm(r.s.o.Debounce)
		return false
	}
	r.confirming = false
	r.lastKey = key
	r.deliver(ev)
	return true
}

// load reads and parses the file. key identifies the result: equal keys
// mean equal Events.
func (r *fileRun) load() (string, Event) {
	ev := Event{Source: r.s.name}
	data, err := readBounded(r.s.path, r.s.o.Limits.MaxPayloadBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		ev.Err = payloadErr(ErrUnavailable, CodeUnavailable, "file %s does not exist", r.s.path)
		return "missing", ev
	case err != nil:
		ev.Err = payloadErr(ErrUnavailable, CodeUnavailable, "reading file: %v", err)
		return "error:" + err.Error(), ev
	}
	sum := sha256.Sum256(data)
	key := "content:" + string(sum[:])
	if len(data) > r.s.o.Limits.MaxPayloadBytes {
		ev.Err = payloadErr(ErrTooLarge, CodePayloadTooLarge, "file %s is larger than the limit of %d bytes", r.s.path, r.s.o.Limits.MaxPayloadBytes)
		return key, ev
	}
	ev.Update, ev.Err = ParseList(data, r.s.o.Limits)
	return key, ev
}

// readBounded reads at most limit+1 bytes of the regular file at path.
func readBounded(path string, limit int) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		// Opening a FIFO would block; a directory cannot be read.
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(limit)+1))
}
