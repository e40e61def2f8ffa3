package apps

import (
	"cmp"
	"errors"
	"slices"

	"github.com/levee-gw/levee/internal/auth"
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
	// keys is the consumer identity index: the SHA-256 and key ID of
	// every key that is not revoked, of every app (suspended ones too, so
	// that the request path can tell 401 from 403), to its app. Built
	// once here, per committed change; the request path reads this one.
	keys *auth.Index
}

// Errors of Snapshot.Authenticate.
var (
	// ErrUnknownKey: no app holds an active key with that hash (never
	// issued, revoked, or its app deleted).
	ErrUnknownKey = errors.New("unknown or revoked API key")
	// ErrSuspended: the key is valid but its app is suspended.
	ErrSuspended = errors.New("app is suspended")
)

// newSnapshot builds the snapshot of byID and its identity index:
// O(apps + keys). A digest or key ID two apps hold cannot come from the
// store's own writes (the schema and seeding refuse it); the index leaves
// it out and reports it (Conflicts), the caller logs it.
func newSnapshot(byID map[string]*App) (*Snapshot, error) {
	s := &Snapshot{apps: byID, ids: make([]string, 0, len(byID))}
	var creds []auth.Credential
	for id, a := range byID {
		s.ids = append(s.ids, id)
		for _, k := range a.Keys {
			if !k.Active() {
				continue
			}
			d, err := auth.ParseDigest(k.SHA256)
			if err != nil {
				continue
			}
			creds = append(creds, auth.Credential{AppID: id, KeyID: k.ID, Digest: d})
		}
	}
	slices.Sort(s.ids)
	// In app order, so that a conflict is reported the same way each time.
	slices.SortStableFunc(creds, func(a, b auth.Credential) int { return cmp.Compare(a.AppID, b.AppID) })
	x, err := auth.NewIndex(creds)
	if err != nil {
		return nil, err
	}
	certs := certMappings(byID)
	slices.SortStableFunc(certs, func(a, b auth.CertMapping) int { return cmp.Compare(a.AppID, b.AppID) })
	s.keys = x.WithCerts(certs)
	return s, nil
}

// Identities returns the consumer identity index of the snapshot's
// active keys (nil for a nil snapshot, which holds none).
func (s *Snapshot) Identities() *auth.Index {
	if s == nil {
		return nil
	}
	return s.keys
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
// sum, whatever the app's status, from the identity index.
func (s *Snapshot) LookupKey(sum [32]byte) (KeyRef, bool) {
	appID, keyID, ok := s.Identities().LookupKey(sum)
	if !ok {
		return KeyRef{}, false
	}
	return KeyRef{App: s.apps[appID], KeyID: keyID}, true
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
