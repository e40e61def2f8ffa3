package statedb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// LockFile is the file under state_dir that `levee run` holds an
// exclusive lock on (flock) for its whole life.
const LockFile = "levee.lock"

// DirLock is a held flock on <state_dir>/levee.lock. The kernel drops it
// when the process exits, however it exits, so a crashed levee never
// leaves a stale lock behind; the pid written in the file is only for the
// error message of the process refused.
type DirLock struct {
	once sync.Once
	f    *os.File
}

// ErrDirInUse is wrapped by LockDir's refusal.
var ErrDirInUse = errors.New("in use by another levee process")

// LockDir takes the lock without waiting: two levee processes on one
// state_dir would each overwrite the other's snapshots, app store and
// cursor key, so the second refuses to start, naming the directory and
// the holder's pid.
func LockDir(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("state_dir: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state_dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		// The holder's pid, as it wrote it: a few bytes, read bounded.
		buf := make([]byte, 32)
		if n, _ := f.ReadAt(buf, 0); n > 0 {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(buf[:n]))); perr == nil {
				holder = fmt.Sprintf(", pid %d", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state_dir %s: %w%s (it holds %s): each levee process needs its own state_dir",
				dir, ErrDirInUse, holder, path)
		}
		return nil, fmt.Errorf("state_dir %s: locking %s: %w", dir, path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DirLock{f: f}, nil
}

// Release drops the lock (once; nil-safe). The pid stays in the file: it
// only names a holder while the file is locked.
func (l *DirLock) Release() {
	if l == nil {
		return
	}
	l.once.Do(func() { l.f.Close() })
}
