package rollback

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The states of a Version.
const (
	StateWatching = "watching"    // applied, its window not over
	StateGood     = "good"        // survived its window
	StateBad      = "rolled_back" // hurt: reverted and pinned
	StateHurt     = "hurt"        // hurt, but nothing to revert to (or the revert failed): not pinned
)

// Version is one change as the Store keeps it.
type Version struct {
	N       int       `json:"version"`
	Kind    Kind      `json:"kind"`
	Subject string    `json:"subject"`
	Digest  string    `json:"digest"`
	At      time.Time `json:"at"`
	State   string    `json:"state"`
	Reason  string    `json:"reason,omitempty"`
}

// Pin is a bad version's content, never applied again automatically
// (until an operator unpins it).
type Pin struct {
	Version int       `json:"version"`
	Kind    Kind      `json:"kind"`
	Subject string    `json:"subject"`
	Digest  string    `json:"digest"`
	At      time.Time `json:"at"`
	Reason  string    `json:"reason"`
}

// Start is one start of the process.
type Start struct {
	At       time.Time `json:"at"`
	Survived bool      `json:"survived"`
}

// Bounds of the state file: the versions kept (StoreOptions.Keep), the pins
// (the oldest is dropped past maxPins, with a log by the caller) and the
// starts remembered for crash loops.
const (
	maxPins   = 256
	maxStarts = 16
)

// ErrNoPin is Unpin's answer for a version that is not pinned.
var ErrNoPin = errors.New("no pin of that version")

// state is the JSON of the state file.
type state struct {
	Next     int       `json:"next"`
	Versions []Version `json:"versions"`
	Pins     []Pin     `json:"pins"`
	Starts   []Start   `json:"starts"`
	// GoodDigest is the digest of good.yaml, the configuration file's
	// content as it was when last judged good.
	GoodDigest string `json:"good_config_digest,omitempty"`
}

// Store keeps the versions, pins, starts and the last good configuration
// under dir (state_dir/rollback): state.json and good.yaml, each replaced
// whole (written to a temporary file, synced, renamed). Safe for
// concurrent use.
type Store struct {
	dir  string
	keep int
	mu   sync.Mutex
	st   state
}

// OpenStore reads (or starts) the store in dir, keeping the last keep
// versions.
func OpenStore(dir string, keep int) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("rollback: %w", err)
	}
	s := &Store{dir: dir, keep: max(keep, 1)}
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("rollback: %w", err)
	default:
		if err := json.Unmarshal(data, &s.st); err != nil {
			return nil, fmt.Errorf("rollback: reading %s: %w", filepath.Join(dir, "state.json"), err)
		}
	}
	return s, nil
}

// Digest is the digest of content that versions and pins name.
func Digest(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// Record adds a version of kind and subject, content digest, applied at
// now and watched from now; it returns its number.
func (s *Store) Record(now time.Time, kind Kind, subject, digest, state string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Next++
	n := s.st.Next
	s.st.Versions = append(s.st.Versions, Version{N: n, Kind: kind, Subject: subject, Digest: digest, At: now.UTC(), State: state})
	if over := len(s.st.Versions) - s.keep; over > 0 {
		s.st.Versions = append(s.st.Versions[:0], s.st.Versions[over:]...)
	}
	return n, s.saveLocked()
}

// Mark sets version n's state and reason (a version no longer kept is
// left alone).
func (s *Store) Mark(n int, state, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.st.Versions {
		if s.st.Versions[i].N == n {
			s.st.Versions[i].State, s.st.Versions[i].Reason = state, reason
		}
	}
	return s.saveLocked()
}

// PinVersion pins c's content with reason at now. It reports the pin
// dropped to keep the bound (zero Version: none).
func (s *Store) PinVersion(now time.Time, c Change, reason string) (dropped Pin, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.st.Pins {
		if p.Kind == c.Kind && p.Subject == c.Subject && p.Digest == c.Digest {
			return Pin{}, nil
		}
	}
	if len(s.st.Pins) == maxPins {
		dropped = s.st.Pins[0]
		s.st.Pins = append(s.st.Pins[:0], s.st.Pins[1:]...)
	}
	s.st.Pins = append(s.st.Pins, Pin{Version: c.Version, Kind: c.Kind, Subject: c.Subject, Digest: c.Digest, At: now.UTC(), Reason: reason})
	return dropped, s.saveLocked()
}

// Pinned returns the pin of kind, subject and digest, if any.
func (s *Store) Pinned(kind Kind, subject, digest string) (Pin, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.st.Pins {
		if p.Kind == kind && p.Subject == subject && p.Digest == digest {
			return p, true
		}
	}
	return Pin{}, false
}

// Unpin removes the pin of version n (ErrNoPin: none).
func (s *Store) Unpin(n int) (Pin, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.st.Pins {
		if p.Version == n {
			s.st.Pins = append(s.st.Pins[:i], s.st.Pins[i+1:]...)
			return p, s.saveLocked()
		}
	}
	return Pin{}, ErrNoPin
}

// SaveGood keeps content as the last good configuration file.
func (s *Store) SaveGood(content []byte) error {
	d := Digest(content)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.GoodDigest == d {
		return nil
	}
	if err := writeFile(filepath.Join(s.dir, "good.yaml"), content); err != nil {
		return err
	}
	s.st.GoodDigest = d
	return s.saveLocked()
}

// Good returns the last good configuration file's content (nil: none yet,
// or its file lost or not matching its digest).
func (s *Store) Good() []byte {
	s.mu.Lock()
	d := s.st.GoodDigest
	s.mu.Unlock()
	if d == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(s.dir, "good.yaml"))
	if err != nil || Digest(data) != d {
		return nil
	}
	return data
}

// BeginStart records a start at now and reports whether it follows a
// crash loop: the last starts (crashStarts of them, all within within of
// now) each ended before surviving its window.
func (s *Store) BeginStart(now time.Time, crashStarts int, within time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	loop := crashStarts > 0 && len(s.st.Starts) >= crashStarts
	for i := len(s.st.Starts) - crashStarts; loop && i < len(s.st.Starts); i++ {
		st := s.st.Starts[i]
		if st.Survived || now.Sub(st.At) > within {
			loop = false
		}
	}
	s.st.Starts = append(s.st.Starts, Start{At: now.UTC()})
	if over := len(s.st.Starts) - maxStarts; over > 0 {
		s.st.Starts = append(s.st.Starts[:0], s.st.Starts[over:]...)
	}
	return loop, s.saveLocked()
}

// Survived marks the latest start as having survived its window.
func (s *Store) Survived() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.st.Starts) == 0 {
		return nil
	}
	s.st.Starts[len(s.st.Starts)-1].Survived = true
	return s.saveLocked()
}

// View is what the admin API shows.
type View struct {
	Versions []Version `json:"versions"` // newest first
	Pins     []Pin     `json:"pins"`
	Starts   []Start   `json:"starts"` // newest first
	// GoodConfigDigest is the digest of the last good configuration file.
	GoodConfigDigest string `json:"good_config_digest,omitempty"`
}

// View returns a copy of what the store holds.
func (s *Store) View() View {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := View{Versions: make([]Version, 0, len(s.st.Versions)), Pins: append([]Pin{}, s.st.Pins...),
		Starts: make([]Start, 0, len(s.st.Starts)), GoodConfigDigest: s.st.GoodDigest}
	for i := len(s.st.Versions) - 1; i >= 0; i-- {
		v.Versions = append(v.Versions, s.st.Versions[i])
	}
	for i := len(s.st.Starts) - 1; i >= 0; i-- {
		v.Starts = append(v.Starts, s.st.Starts[i])
	}
	return v
}

func (s *Store) saveLocked() error {
	data, err := json.MarshalIndent(&s.st, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(s.dir, "state.json"), data)
}

// writeFile replaces path with data: a temporary file written and synced,
// then renamed over it.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}
