package clusterstore

import (
	"context"

	"github.com/levee-gw/levee/internal/apps"
)

// Basic-auth passwords and certificate mappings in the shared state: kept
// in each app's record (apps.Record's passwords, with their argon2id
// digests, and certificates), so a change made on one node is applied by
// every node's watch like any other change of the app.

var (
	_ apps.PasswordBackend    = (*Store)(nil)
	_ apps.CertificateBackend = (*Store)(nil)
)

// CreatePassword adds a basic-auth password to app id; the argon2id
// digest is computed before the write and only it reaches etcd.
func (s *Store) CreatePassword(ctx context.Context, id, plaintext string) (apps.NewPassword, error) {
	np, err := apps.MakePassword(plaintext, s.o.Now())
	if err != nil {
		return apps.NewPassword{}, err
	}
	if err := s.write(ctx, func(st *apps.State) error { return st.AddPassword(id, np, s.o.Now()) }); err != nil {
		return apps.NewPassword{}, err
	}
	return np, nil
}

// RevokePassword revokes a basic-auth password of app id.
func (s *Store) RevokePassword(ctx context.Context, id, pwID string) (out apps.Password, err error) {
	err = s.write(ctx, func(st *apps.State) (err error) {
		out, err = st.RevokePassword(id, pwID, s.o.Now())
		return err
	})
	return out, err
}

// AddCertificate maps a client certificate to app id.
func (s *Store) AddCertificate(ctx context.Context, id string, spec apps.CertificateSpec) (apps.Certificate, error) {
	c, err := apps.NewCertificate(spec, s.o.Now())
	if err != nil {
		return apps.Certificate{}, err
	}
	if err := s.write(ctx, func(st *apps.State) error { return st.AddCertificate(id, c, s.o.Now()) }); err != nil {
		return apps.Certificate{}, err
	}
	return c, nil
}

// DeleteCertificate removes a certificate mapping of app id.
func (s *Store) DeleteCertificate(ctx context.Context, id, certID string) (out apps.Certificate, err error) {
	err = s.write(ctx, func(st *apps.State) (err error) {
		out, err = st.DeleteCertificate(id, certID, s.o.Now())
		return err
	})
	return out, err
}
