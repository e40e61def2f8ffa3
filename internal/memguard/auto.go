package memguard

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The limit of a process that configures none (no `memory` block): the
// memory guard is on by default, its limit taken from where the process
// is bounded.
//
//   - GOMEMLIMIT, when set: the operator's own figure for the Go runtime,
//     taken whole (it already is a limit of the runtime's memory).
//   - The cgroup's memory limit (v2 memory.max, v1 memory.limit_in_bytes;
//     the lowest along the process's cgroup path up to the root), less a
//     margin of AutoMargin (10%): the cgroup also charges memory the Go
//     runtime does not count (the kernel's buffers and page cache for the
//     process's files, socket buffers), and the OOM killer acts at the
//     cgroup's limit, not the runtime's.
//   - With both, the lower. With neither, the machine's memory
//     (/proc/meminfo MemTotal) less the same margin: without a container
//     limit, the kernel's OOM killer acts when the machine runs out, so
//     that is the bound to stay under; it is high enough that a shared
//     machine sheds nothing until memory is really short, and the runtime's
//     soft limit still makes the collector work harder before the kernel
//     kills. Off only when not even that can be read (logged).
//
// The watermarks are the memory block's defaults (0.8 and 0.9 of the
// limit).

// AutoMargin is the share of a cgroup's (or the machine's) memory left out
// of the automatic limit.
const AutoMargin = 0.10

// Sources of an automatic limit, as Auto.Source and the startup log
// name them.
const (
	SourceGOMEMLIMIT = "GOMEMLIMIT"
	SourceCgroupV2   = "cgroup v2 memory.max"
	SourceCgroupV1   = "cgroup v1 memory.limit_in_bytes"
	SourceMachine    = "/proc/meminfo MemTotal"
)

// Auto is an automatic limit and where it came from.
type Auto struct {
	// Limit is the limit in bytes; 0 when none could be found (the guard
	// stays off).
	Limit int64
	// Source is one of the Source constants ("" with no limit).
	Source string
	// From is the figure the limit came from (the cgroup's or machine's
	// bytes before the margin, GOMEMLIMIT's value) and File the file read
	// ("" for GOMEMLIMIT).
	From int64
	File string
}

// String says the limit and where it came from, for the startup log.
func (a Auto) String() string {
	if a.Limit == 0 {
		return "none found (no GOMEMLIMIT, no cgroup memory limit, no /proc/meminfo): the memory guard is off"
	}
	if a.Source == SourceGOMEMLIMIT {
		return fmt.Sprintf("%d bytes from GOMEMLIMIT", a.Limit)
	}
	return fmt.Sprintf("%d bytes: %s %d (%s) less %g%%", a.Limit, a.Source, a.From, a.File, AutoMargin*100)
}

// Env is where DetectLimit looks; DefaultEnv is the process's own. Tests
// point it at sample files.
type Env struct {
	// GOMEMLIMIT is the variable's value ("" when unset).
	GOMEMLIMIT string
	// ProcCgroup is /proc/self/cgroup, CgroupRoot /sys/fs/cgroup, MemInfo
	// /proc/meminfo.
	ProcCgroup, CgroupRoot, MemInfo string
}

// DefaultEnv is the running process's environment.
func DefaultEnv() Env {
	return Env{GOMEMLIMIT: os.Getenv("GOMEMLIMIT"), ProcCgroup: "/proc/self/cgroup", CgroupRoot: "/sys/fs/cgroup", MemInfo: "/proc/meminfo"}
}

// DetectLimit finds the automatic limit in env (see the rule above). A
// GOMEMLIMIT that does not parse is an error (the Go runtime refuses to
// start with one too).
func DetectLimit(env Env) (Auto, error) {
	var best Auto
	if env.GOMEMLIMIT != "" {
		n, err := ParseGOMEMLIMIT(env.GOMEMLIMIT)
		if err != nil {
			return Auto{}, err
		}
		if n > 0 {
			best = Auto{Limit: n, Source: SourceGOMEMLIMIT, From: n}
		}
	}
	if c, ok := cgroupLimit(env); ok {
		if lim := withMargin(c.From); best.Limit == 0 || lim < best.Limit {
			c.Limit = lim
			best = c
		}
	}
	if best.Limit > 0 {
		return best, nil
	}
	if total, ok := memTotal(env.MemInfo); ok {
		return Auto{Limit: withMargin(total), Source: SourceMachine, From: total, File: env.MemInfo}, nil
	}
	return Auto{}, nil
}

func withMargin(n int64) int64 { return int64(float64(n) * (1 - AutoMargin)) }

// maxFileBytes bounds every file read here (a cgroup file holds one
// number; /proc/self/cgroup a line per hierarchy, /proc/meminfo ~50 lines).
const maxFileBytes = 64 << 10

// maxCgroupDepth bounds the walk up a cgroup path.
const maxCgroupDepth = 64

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxFileBytes))
}

// cgroupLimit reads the lowest memory limit along the process's cgroup
// path (v2 first, then v1), From set and Limit not yet.
func cgroupLimit(env Env) (Auto, bool) {
	data, err := readSmall(env.ProcCgroup)
	if err != nil {
		return Auto{}, false
	}
	v2, v1 := ParseProcCgroup(data)
	if v2 != "" {
		if a, ok := lowestAlong(filepath.Join(env.CgroupRoot), v2, "memory.max", SourceCgroupV2); ok {
			return a, true
		}
		// A cgroup v2 mount at /sys/fs/cgroup/unified (hybrid): the v1
		// memory controller holds the limit then.
	}
	if v1 != "" {
		if a, ok := lowestAlong(filepath.Join(env.CgroupRoot, "memory"), v1, "memory.limit_in_bytes", SourceCgroupV1); ok {
			return a, true
		}
	}
	return Auto{}, false
}

// lowestAlong reads file in the cgroup directory of path under root and
// in each parent up to root, and returns the lowest limit found. A path
// not present under root (a cgroup namespace whose root is the process's
// own cgroup) is read from root alone.
func lowestAlong(root, path, file, source string) (Auto, bool) {
	var best Auto
	dir := filepath.Join(root, filepath.Clean("/"+path))
	if _, err := os.Stat(dir); err != nil {
		dir = root
	}
	for range maxCgroupDepth {
		p := filepath.Join(dir, file)
		if data, err := readSmall(p); err == nil {
			if n, ok := ParseCgroupLimit(data); ok && (best.From == 0 || n < best.From) {
				best = Auto{Source: source, From: n, File: p}
			}
		}
		if dir == root || len(dir) <= len(root) {
			break
		}
		dir = filepath.Dir(dir)
	}
	return best, best.From > 0
}

// ParseProcCgroup returns the process's cgroup v2 path (the "0::PATH"
// line) and its v1 memory controller's path (a "N:...memory...:PATH"
// line) from /proc/self/cgroup's text; "" for each one absent.
func ParseProcCgroup(data []byte) (v2, v1 string) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxFileBytes)
	for lines := 0; sc.Scan() && lines < 1024; lines++ { // a line per hierarchy: a handful
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(path, "/") {
			continue
		}
		switch {
		case id == "0" && ctrls == "":
			v2 = path
		case ctrlsHave(ctrls, "memory"):
			v1 = path
		}
	}
	return v2, v1
}

func ctrlsHave(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// v1Unlimited: cgroup v1 writes "no limit" as the largest page-aligned
// int64 (9223372036854771712); anything from 2^62 up is taken as none.
const v1Unlimited = 1 << 62

// ParseCgroupLimit reads a cgroup memory limit file: a byte count, or
// "max" (v2) or a value from 2^62 up (v1) for none (false).
func ParseCgroupLimit(data []byte) (int64, bool) {
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= v1Unlimited {
		return 0, false
	}
	return n, true
}

// memTotal reads MemTotal from /proc/meminfo ("MemTotal: 24683748 kB").
func memTotal(path string) (int64, bool) {
	data, err := readSmall(path)
	if err != nil {
		return 0, false
	}
	return ParseMemTotal(data)
}

// ParseMemTotal reads MemTotal, in bytes, from /proc/meminfo's text.
func ParseMemTotal(data []byte) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxFileBytes)
	for lines := 0; sc.Scan() && lines < 1024; lines++ {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n <= 0 || n > math.MaxInt64/1024 {
			return 0, false
		}
		return n * 1024, true
	}
	return 0, false
}

// ParseGOMEMLIMIT reads GOMEMLIMIT as the Go runtime does: a byte count
// with an optional unit (B, KiB, MiB, GiB, TiB), or "off" (0: no limit).
func ParseGOMEMLIMIT(s string) (int64, error) {
	if s == "off" {
		return 0, nil
	}
	num, unit := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, unit = n, u.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 63)
	if err != nil || num == "" || num[0] == '+' || n > uint64(math.MaxInt64/unit) {
		return 0, fmt.Errorf("GOMEMLIMIT=%q: want a byte count such as 512MiB (units B, KiB, MiB, GiB, TiB) or off", s)
	}
	return int64(n) * unit, nil
}
