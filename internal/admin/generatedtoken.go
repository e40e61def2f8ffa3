package admin

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The token levee generates under state_dir when no admin token is
// configured (admin.token: generate, the default): made once, read back
// at every later start, refused when it may have leaked.

// GeneratedToken returns the token in stateDir's file fileName (the
// gateway's config.AdminTokenFileName; read with read, config's token file
// reader), making it first when there is none: 32
// random bytes as 64 hex digits, written to a file created with O_EXCL
// and mode 0600. A file that is not a regular file, is readable by group
// or others, or does not hold a token is an error (levee does not start):
// its token may have leaked or been planted.
func GeneratedToken(stateDir, fileName string, read func(path string) (string, error)) (tok, path string, created bool, err error) {
	path = filepath.Join(stateDir, fileName)
	if abs, aerr := filepath.Abs(path); aerr == nil {
		path = abs // the log line and the demo name it whole
	}
	for range 2 { // a second try reads a file another process created at once
		tok, err = readGeneratedToken(path, read)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return tok, path, false, err
		}
		tok, err = writeGeneratedToken(stateDir, path)
		if err == nil || !errors.Is(err, fs.ErrExist) {
			return tok, path, err == nil, err
		}
	}
	return "", path, false, err
}

// readGeneratedToken reads the generated token file; an error wrapping
// fs.ErrNotExist when there is none.
func readGeneratedToken(path string, read func(string) (string, error)) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("admin.token: reading the generated admin token: %w; fix state_dir, or set admin.token_file (or admin.token: none on a loopback admin.listen)", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("admin.token: the generated admin token %s is not a regular file; remove it to have a new one made, or set admin.token_file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("admin.token: the generated admin token %s has mode %04o: group or others may read it; chmod 600 it, or remove it to have a new one made", path, perm)
	}
	tok, err := read(path)
	if err != nil {
		return "", fmt.Errorf("admin.token: the generated admin token: %v; remove the file to have a new one made", err)
	}
	return tok, nil
}

// writeGeneratedToken makes the token file; an error wrapping fs.ErrExist
// when another process made it first.
func writeGeneratedToken(stateDir, path string) (string, error) {
	fail := func(err error) error {
		return fmt.Errorf("admin.token: cannot write the generated admin token under state_dir %q: %w; make state_dir writable, or set admin.token_file (or admin.token: none on a loopback admin.listen)", stateDir, err)
	}
	if err := os.MkdirAll(stateDir, 0o750); err != nil {
		return "", fail(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", err
		}
		return "", fail(err)
	}
	var secret [32]byte
	_, _ = rand.Read(secret[:]) // never fails (crypto/rand)
	tok := hex.EncodeToString(secret[:])
	_, err = f.WriteString(tok + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path) // half a token would stop the next start
		return "", fail(err)
	}
	return tok, nil
}
