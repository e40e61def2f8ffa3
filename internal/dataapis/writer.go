package dataapis

import (
	"context"
	"sync"
)

// Writer is the admin API's view of a Backend (admin.DataAPIStore): every
// write serialised under Lock, every definition checked before it is
// stored, and every change to what serves followed by Applied before the
// call returns.
type Writer struct {
	Store Backend
	// Lock serialises the writes with everything else that writes the
	// store or reads what serves (the gateway's reload lock), so a check
	// made before a write still holds when it commits.
	Lock sync.Locker
	// Check checks body as data API name's definition and returns its
	// canonical form; a refusal is an *InvalidError.
	Check func(name string, body []byte) ([]byte, error)
	// CheckServe checks that version n of data API name, definition def,
	// may serve beside what serves (called before a publish or rollback).
	CheckServe func(name string, n int, def []byte) error
	// Applied makes what serves follow the store (the gateway rebuilds
	// and swaps its table).
	Applied func() error
	// Published, when set, is told of each publish (not a rollback) once
	// it serves: the version, its definition, and the version that served
	// before (0: none) — the automatic rollback's hook (docs/rollback.md).
	Published func(name string, version int, def []byte, previous int)
}

func (w Writer) Get(ctx context.Context, name string) (*API, error) { return w.Store.Get(ctx, name) }

func (w Writer) List(ctx context.Context, after string, limit int) (Page, error) {
	return w.Store.List(ctx, after, limit)
}

func (w Writer) Create(ctx context.Context, name string, body []byte) (*API, error) {
	w.Lock.Lock()
	defer w.Lock.Unlock()
	def, err := w.Check(name, body)
	if err != nil {
		return nil, err
	}
	return w.Store.Create(ctx, name, def)
}

func (w Writer) AddVersion(ctx context.Context, name string, body []byte) (*API, error) {
	w.Lock.Lock()
	defer w.Lock.Unlock()
	if _, err := w.Store.Get(ctx, name); err != nil {
		return nil, err
	}
	def, err := w.Check(name, body)
	if err != nil {
		return nil, err
	}
	return w.Store.AddVersion(ctx, name, def)
}

func (w Writer) Publish(ctx context.Context, name string, version int) (*API, error) {
	return w.publish(ctx, name, version, false)
}

func (w Writer) Rollback(ctx context.Context, name string, version int) (*API, error) {
	return w.publish(ctx, name, version, true)
}

// publish checks that the version a publish or rollback goes to may
// serve (CheckServe), then makes it serve.
func (w Writer) publish(ctx context.Context, name string, version int, rollback bool) (*API, error) {
	w.Lock.Lock()
	defer w.Lock.Unlock()
	n, def, err := w.Store.Resolve(ctx, name, version, rollback)
	if err != nil {
		return nil, err
	}
	if err := w.CheckServe(name, n, def); err != nil {
		return nil, err
	}
	previous := 0
	if w.Published != nil && !rollback {
		if a, err := w.Store.Get(ctx, name); err == nil && a.State == Published {
			previous = a.Published
		}
	}
	call := w.Store.Publish
	if rollback {
		call = w.Store.Rollback
	}
	a, err := call(ctx, name, n)
	if err != nil {
		return nil, err
	}
	if err := w.Applied(); err != nil {
		return a, err
	}
	if w.Published != nil && !rollback && previous != n {
		w.Published(name, n, def, previous)
	}
	return a, nil
}

func (w Writer) Offline(ctx context.Context, name string) (*API, error) {
	w.Lock.Lock()
	defer w.Lock.Unlock()
	a, err := w.Store.Offline(ctx, name)
	if err != nil {
		return nil, err
	}
	return a, w.Applied()
}

func (w Writer) Delete(ctx context.Context, name string) error {
	w.Lock.Lock()
	defer w.Lock.Unlock()
	if err := w.Store.Delete(ctx, name); err != nil {
		return err
	}
	return w.Applied()
}
