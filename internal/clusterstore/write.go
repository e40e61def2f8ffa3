package clusterstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/levee-gw/levee/internal/apps"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file is the apps.Backend side of the Store: reads from the state
// the watch applied, writes as one etcd transaction each.

var _ apps.Backend = (*Store)(nil)

// Get returns an app of the current snapshot.
func (s *Store) Get(_ context.Context, id string) (*apps.App, error) {
	a, ok := s.Current().App(id)
	if !ok {
		return nil, fmt.Errorf("app %q: %w", id, apps.ErrNotFound)
	}
	return a, nil
}

// List returns up to limit apps of the current snapshot after after.
func (s *Store) List(_ context.Context, after string, limit int) (apps.Page, error) {
	if limit <= 0 {
		limit = apps.DefaultPageSize
	}
	limit = min(limit, apps.MaxPageSize)
	p := apps.Page{Apps: []*apps.App{}}
	for _, a := range s.Current().Apps() {
		if a.ID <= after {
			continue
		}
		if len(p.Apps) == limit {
			p.Next = p.Apps[limit-1].ID
			break
		}
		p.Apps = append(p.Apps, a)
	}
	return p, nil
}

// Create adds an app defined through the API.
func (s *Store) Create(ctx context.Context, spec apps.Spec) (out *apps.App, err error) {
	err = s.write(ctx, func(st *apps.State) (err error) {
		out, err = st.Create(spec, s.o.Now())
		return err
	})
	return out, err
}

// Patch changes an app's fields.
func (s *Store) Patch(ctx context.Context, id string, p apps.Patch) (out *apps.App, err error) {
	err = s.write(ctx, func(st *apps.State) (err error) {
		out, err = st.Patch(id, p, s.o.Now())
		return err
	})
	return out, err
}

// Delete removes an app.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.write(ctx, func(st *apps.State) error { return st.Delete(id) })
}

// CreateKey generates a key for app id; only its digest reaches etcd.
func (s *Store) CreateKey(ctx context.Context, id string) (apps.NewKey, error) {
	nk, err := apps.NewAPIKey(s.o.Now())
	if err != nil {
		return apps.NewKey{}, err
	}
	if err := s.write(ctx, func(st *apps.State) error { return st.AddKey(id, nk, s.o.Now()) }); err != nil {
		return apps.NewKey{}, err
	}
	return nk, nil
}

// RevokeKey revokes a key of app id.
func (s *Store) RevokeKey(ctx context.Context, id, keyID string) (out apps.Key, err error) {
	err = s.write(ctx, func(st *apps.State) (err error) {
		out, err = st.RevokeKey(id, keyID, s.o.Now())
		return err
	})
	return out, err
}

// Seed applies the file's apps to the shared state in one transaction:
// whichever node seeds a change first applies it, the others then find
// it Unchanged. While etcd is unreachable the file is kept and seeded
// when etcd answers again; the error says so.
func (s *Store) Seed(ctx context.Context, file []apps.FileApp) (apps.SeedResult, error) {
	s.mu.Lock()
	s.pending, s.hasSeed = file, true
	s.mu.Unlock()
	var res apps.SeedResult
	err := s.write(ctx, func(st *apps.State) (err error) {
		res, err = st.Seed(file, s.o.Now(), s.log.Warn)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("seeding the shared apps (retried when etcd answers): %w", err)
	}
	s.mu.Lock()
	s.pending, s.hasSeed = nil, false
	s.mu.Unlock()
	return res, nil
}

// seedPending seeds a file Seed could not apply while etcd was away.
func (s *Store) seedPending() {
	s.mu.Lock()
	file, has := s.pending, s.hasSeed
	s.mu.Unlock()
	if !has {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.o.OpTimeout)
	defer cancel()
	if res, err := s.Seed(ctx, file); err != nil {
		s.log.Error("apps: seeding the shared apps from the file failed", "error", err)
	} else {
		s.log.Info("apps seeded from the file into etcd", "created", len(res.Created), "updated", len(res.Updated),
			"unchanged", len(res.Unchanged), "failed", len(res.Failed))
	}
}

// write applies fn to the shared state and commits what it changed in one
// transaction that holds only if no other write committed since the state
// was read (the version key); on a race it reads again, at most
// writeAttempts times. Once committed it waits (within the op timeout)
// until the watch has applied the change here, so the caller reads its
// own write. While etcd is known to be down it fails at once with
// apps.ErrUnavailable; an etcd error or timeout wraps it too.
func (s *Store) write(ctx context.Context, fn func(*apps.State) error) error {
	if up, _ := s.Up(); !up {
		return errDown
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.OpTimeout)
	defer cancel()
	version := s.key("state/version")
	for range writeAttempts {
		resp, err := s.cli.Get(ctx, version)
		if err != nil {
			return unavailable(err)
		}
		st, rev, err := s.load(clientv3.WithRequireLeader(ctx))
		if err != nil {
			return unavailable(err)
		}
		var vrev int64
		if len(resp.Kvs) > 0 {
			vrev = resp.Kvs[0].ModRevision
		}
		// The version may have moved between the two reads: the
		// transaction below then fails and the loop reads again.
		next := st.Clone()
		if err := fn(next); err != nil {
			return err
		}
		ops, err := s.diff(st, next)
		if err != nil {
			return err
		}
		if len(ops) == 0 {
			return nil
		}
		ops = append(ops, clientv3.OpPut(version, fmt.Sprint(rev)))
		tr, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(version), "=", vrev)).Then(ops...).Commit()
		if err != nil {
			return unavailable(err)
		}
		if !tr.Succeeded {
			continue
		}
		s.waitRev(ctx, tr.Header.Revision)
		return nil
	}
	return fmt.Errorf("the shared app store is busy with other writes; retry: %w", apps.ErrUnavailable)
}

// unavailable wraps an etcd error as apps.ErrUnavailable.
func unavailable(err error) error {
	return fmt.Errorf("etcd: %w (%w)", apps.ErrUnavailable, err)
}

// diff returns the puts and deletes that turn from into to: records
// compared by pointer (State's writes are copy-on-write).
func (s *Store) diff(from, to *apps.State) ([]clientv3.Op, error) {
	var ops []clientv3.Op
	for id, r := range to.Apps {
		if from.Apps[id] == r {
			continue
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if len(b) > maxValueBytes {
			return nil, errors.New("app " + id + " is too large to store")
		}
		ops = append(ops, clientv3.OpPut(s.key("state/apps/", id), string(b)))
	}
	for id := range from.Apps {
		if to.Apps[id] == nil {
			ops = append(ops, clientv3.OpDelete(s.key("state/apps/", id)))
		}
	}
	for id, h := range to.Tombstones {
		if old, ok := from.Tombstones[id]; !ok || old != h {
			ops = append(ops, clientv3.OpPut(s.key("state/tombstones/", id), h))
		}
	}
	for id := range from.Tombstones {
		if _, ok := to.Tombstones[id]; !ok {
			ops = append(ops, clientv3.OpDelete(s.key("state/tombstones/", id)))
		}
	}
	return ops, nil
}

// waitRev waits until the state applied here is at rev or later, or ctx
// ends (the write has committed either way).
func (s *Store) waitRev(ctx context.Context, rev int64) {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.rev < rev && ctx.Err() == nil && !s.closed {
		s.cond.Wait()
	}
}
