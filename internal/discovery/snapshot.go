package discovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/levee-gw/levee/internal/limits"
)

// Snapshots: the last good list of each upstream, kept on disk so that
// levee can start serving while its registry is unreachable.
//
// A snapshot is the upstream's instances in the instance format, as a JSON
// array, in the file <dir>/<upstream>.json. It is written atomically (a
// temporary file in the same directory, fsync, rename over the old file,
// fsync of the directory), so a reader sees the old file or the new one,
// never a part. It is read back through ParseList: a tampered file is
// validated like any registry payload, and because levee only ever writes
// valid lists, any rejected instance in it means corruption and the whole
// snapshot is refused.

// ErrCorruptSnapshot: a snapshot file exists but does not hold a valid list.
var ErrCorruptSnapshot = errors.New("corrupt snapshot")

const snapshotSuffix = ".json"

// snapshotPath returns the snapshot file for upstream, whose name must
// follow levee's rule for names: 1 to 64 bytes of a-z, 0-9, "_", "." and
// "-". With the suffix, "." and ".." become plain file names, and no name
// can hold a path separator.
func snapshotPath(dir, upstream string) (string, error) {
	if len(upstream) == 0 || len(upstream) > 64 {
		return "", fmt.Errorf("discovery: snapshot: upstream name %q must be 1 to 64 bytes", upstream)
	}
	if !limits.ValidID(upstream) {
		return "", fmt.Errorf(`discovery: snapshot: upstream name %q must hold only a-z, 0-9, "_", "." and "-"`, upstream)
	}
	return filepath.Join(dir, upstream+snapshotSuffix), nil
}

// wireInstance is an Instance in the instance format.
type wireInstance struct {
	Address  string            `json:"address"`
	Weight   json.Number       `json:"weight"`
	Zone     string            `json:"zone,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// MarshalList renders instances in the instance format, as a JSON array
// that ParseList reads back to the same instances (for snapshots and the
// admin API).
func MarshalList(list []Instance) ([]byte, error) {
	wire := make([]wireInstance, len(list))
	for i, in := range list {
		wire[i] = wireInstance{Address: in.Address, Weight: json.Number(FormatWeight(in.Weight)), Zone: in.Zone, Metadata: in.Metadata}
	}
	return json.MarshalIndent(wire, "", "  ")
}

// WriteSnapshot writes upstream's instances to dir atomically. On error
// the previous snapshot, if any, is intact and no temporary file is left.
// It blocks on disk I/O (two fsyncs).
func WriteSnapshot(dir, upstream string, list []Instance) error {
	path, err := snapshotPath(dir, upstream)
	if err != nil {
		return err
	}
	data, err := MarshalList(list)
	if err != nil {
		return fmt.Errorf("discovery: snapshot of %s: %w", upstream, err)
	}
	if err := replaceFile(path, data, writeAll); err != nil {
		return fmt.Errorf("discovery: snapshot of %s: %w", upstream, err)
	}
	return nil
}

func writeAll(f *os.File, data []byte) error {
	_, err := f.Write(data)
	return err
}

// replaceFile replaces path with data: temp file beside it, write (through
// write, a seam for tests), fsync, close, rename, fsync the directory.
func replaceFile(path string, data []byte, write func(*os.File, []byte) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = write(f, data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	// The rename is durable only once the directory is synced. The new
	// file is in place by now, so a failure here is reported but nothing
	// is removed.
	d, derr := os.Open(dir)
	if derr != nil {
		return nil
	}
	defer d.Close()
	if serr := d.Sync(); serr != nil && !errors.Is(serr, os.ErrInvalid) {
		return fmt.Errorf("syncing directory %s: %w", dir, serr)
	}
	return nil
}

// ReadSnapshot reads upstream's snapshot from dir through ParseList with
// limits (the upstream's own, so a configured MaxWeight above the default
// reads back). It returns the instances, the file's modification time (when
// the list was last known good), and an error wrapping fs.ErrNotExist when
// there is no snapshot, or ErrCorruptSnapshot when the file does not parse
// or any instance in it is rejected. An empty list is valid.
func ReadSnapshot(dir, upstream string, limits Limits) ([]Instance, time.Time, error) {
	path, err := snapshotPath(dir, upstream)
	if err != nil {
		return nil, time.Time{}, err
	}
	l, err := limits.resolve()
	if err != nil {
		return nil, time.Time{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("discovery: snapshot of %s: %w", upstream, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("discovery: snapshot of %s: %w", upstream, err)
	}
	if !st.Mode().IsRegular() || st.Size() > int64(l.MaxPayloadBytes) {
		return nil, time.Time{}, fmt.Errorf("discovery: snapshot of %s: %w: not a regular file of at most %d bytes", upstream, ErrCorruptSnapshot, l.MaxPayloadBytes)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, int64(l.MaxPayloadBytes)+1)); err != nil {
		return nil, time.Time{}, fmt.Errorf("discovery: snapshot of %s: %w", upstream, err)
	}
	u, err := ParseList(buf.Bytes(), l)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("discovery: snapshot of %s: %w: %w", upstream, ErrCorruptSnapshot, err)
	}
	if len(u.Rejected) > 0 {
		r := u.Rejected[0]
		return nil, time.Time{}, fmt.Errorf("discovery: snapshot of %s: %w: %d instances rejected, first: %w", upstream, ErrCorruptSnapshot, len(u.Rejected), &r)
	}
	return u.Instances, st.ModTime(), nil
}
