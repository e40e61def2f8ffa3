package apps

import (
	"context"
	"errors"
	"fmt"
)

// GrantChecked is a Backend whose creates and patches refuse a grant that
// names no route serving now (Route reports whether one does): the admin
// API's app store. A route removed later leaves the grant inert.
type GrantChecked struct {
	Backend
	// Route reports whether a route of that name serves now.
	Route func(name string) bool
}

func (c GrantChecked) Create(ctx context.Context, spec Spec) (*App, error) {
	if err := c.checkGrants(spec.Grants); err != nil {
		return nil, err
	}
	return c.Backend.Create(ctx, spec)
}

func (c GrantChecked) Patch(ctx context.Context, id string, p Patch) (*App, error) {
	if p.Grants != nil {
		if err := c.checkGrants(*p.Grants); err != nil {
			return nil, err
		}
	}
	return c.Backend.Patch(ctx, id, p)
}

func (c GrantChecked) checkGrants(grants []string) error {
	for i, name := range grants {
		if !c.Route(name) {
			return &ValidationError{Field: fmt.Sprintf("grants[%d]", i), Message: fmt.Sprintf("no route is named %q", name)}
		}
	}
	return nil
}

// GrantedTo counts the apps of all (in id order) granted route and lists
// the first max of their ids (truncated: there were more).
func GrantedTo(all []*App, route string, max int) (n int, ids []string, truncated bool) {
	ids = []string{}
	for _, a := range all {
		if !a.Granted(route) {
			continue
		}
		n++
		if len(ids) < max {
			ids = append(ids, a.ID)
		} else {
			truncated = true
		}
	}
	return n, ids, truncated
}

// PasswordBackend is a Backend that keeps basic-auth passwords
// (passwords.go): *Store and cluster mode's store.
type PasswordBackend interface {
	CreatePassword(ctx context.Context, id, plaintext string) (NewPassword, error)
	RevokePassword(ctx context.Context, id, pwID string) (Password, error)
}

// ErrUnsupported: the store cannot do this (a Backend without passwords
// or certificate mappings). HTTP 501.
var ErrUnsupported = errors.New("not supported by this app store")

// CreatePassword is the Backend's, when it keeps passwords.
func (c GrantChecked) CreatePassword(ctx context.Context, id, plaintext string) (NewPassword, error) {
	if pb, ok := c.Backend.(PasswordBackend); ok {
		return pb.CreatePassword(ctx, id, plaintext)
	}
	return NewPassword{}, fmt.Errorf("basic-auth passwords are not kept by this app store: %w", ErrUnsupported)
}

// RevokePassword is the Backend's, when it keeps passwords.
func (c GrantChecked) RevokePassword(ctx context.Context, id, pwID string) (Password, error) {
	if pb, ok := c.Backend.(PasswordBackend); ok {
		return pb.RevokePassword(ctx, id, pwID)
	}
	return Password{}, fmt.Errorf("basic-auth passwords are not kept by this app store: %w", ErrUnsupported)
}

// AddCertificate is the Backend's, when it keeps certificate mappings.
func (c GrantChecked) AddCertificate(ctx context.Context, id string, spec CertificateSpec) (Certificate, error) {
	if cb, ok := c.Backend.(CertificateBackend); ok {
		return cb.AddCertificate(ctx, id, spec)
	}
	return Certificate{}, fmt.Errorf("certificate mappings are not kept by this app store: %w", ErrUnsupported)
}

// DeleteCertificate is the Backend's, when it keeps certificate mappings.
func (c GrantChecked) DeleteCertificate(ctx context.Context, id, certID string) (Certificate, error) {
	if cb, ok := c.Backend.(CertificateBackend); ok {
		return cb.DeleteCertificate(ctx, id, certID)
	}
	return Certificate{}, fmt.Errorf("certificate mappings are not kept by this app store: %w", ErrUnsupported)
}
