package apps

import (
	"encoding/hex"
	"errors"
	"slices"
)

// KeyRef is what a key resolves to: the app it belongs to and the key's
// id (for logs and metrics; never the key itself).
type KeyRef struct {
	App   *App
	KeyID string
}

// Snapshot is an immutable view of every app and every active key,
// built by the store after each committed change. Lookups are map reads:
// no lock, no allocation, no database. A nil *Snapshot holds no apps. Safe
// for concurrent use; the Apps it returns are shared and must not be
// modified.
type Snapshot struct {
	apps map[string]*App
	ids  []string // sorted
	// keys maps the SHA-256 of every key that is not revoked, of every
	// app (suspended ones too, so that Authenticate can tell the two
	// refusals apart), to its app.
	keys map[[32]byte]KeyRef
}

// Errors of Snapshot.Authenticate.
var (
	// ErrUnknownKey: no app holds an active key with that hash (never
	// issued, revoked, or its app deleted).
	ErrUnknownKey = errors.New("unknown or revoked API key")
	// ErrSuspended: the key is valid but its app is suspended.
	ErrSuspended = errors.New("app is suspended")
)

func newSnapshot(byID map[string]*App) *Snapshot {
	s := &Snapshot{apps: byID, ids: make([]string, 0, len(byID)), keys: map[[32]byte]KeyRef{}}
	for id, a := range byID {
		s.ids = append(s.ids, id)
		for _, k := range a.Keys {
			var sum [32]byte
			if !k.Active() || len(k.SHA256) != 2*len(sum) {
				continue
			}
			if _, err := hex.Decode(sum[:], []byte(k.SHA256)); err != nil {
				continue
			}
			s.keys[sum] = KeyRef{App: a, KeyID: k.ID}
		}
	}
	slices.Sort(s.ids)
	return s
}

// Len returns the number of apps.
func (s *Snapshot) Len() int {
	if s == nil {
		return 0
	}
	return len(s.ids)
}

// App returns the app with id.
func (s *Snapshot) App(id string) (*App, bool) {
	if s == nil {
		return nil, false
	}
	a, ok := s.apps[id]
	return a, ok
}

// Apps returns every app in id order, in a new slice.
func (s *Snapshot) Apps() []*App {
	if s == nil {
		return nil
	}
	out := make([]*App, len(s.ids))
	for i, id := range s.ids {
		out[i] = s.apps[id]
	}
	return out
}

// LookupKey returns the app and key id of the active key whose SHA-256 is
// sum, whatever the app's status.
func (s *Snapshot) LookupKey(sum [32]byte) (KeyRef, bool) {
	if s == nil {
		return KeyRef{}, false
	}
	r, ok := s.keys[sum]
	return r, ok
}

// Authenticate resolves the SHA-256 of a presented key to an app that may
// call levee: ErrUnknownKey when no active key has that hash, ErrSuspended
// when its app is suspended. Grants are the caller's to check
// (App.Granted).
func (s *Snapshot) Authenticate(sum [32]byte) (*App, string, error) {
	r, ok := s.LookupKey(sum)
	switch {
	case !ok:
		return nil, "", ErrUnknownKey
	case !r.App.Active():
		return r.App, r.KeyID, ErrSuspended
	}
	return r.App, r.KeyID, nil
}
