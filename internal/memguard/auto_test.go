package memguard

import (
	"path/filepath"
	"testing"
)

// sample is the Env of one sample machine under testdata/cgroup.
func sample(name, gomemlimit string) Env {
	dir := filepath.Join("testdata", "cgroup", name)
	return Env{GOMEMLIMIT: gomemlimit, ProcCgroup: filepath.Join(dir, "proc_self_cgroup"),
		CgroupRoot: filepath.Join(dir, "root"), MemInfo: filepath.Join("testdata", "cgroup", "meminfo")}
}

// TestDetectLimit: the automatic limit on sample files of each layout:
// cgroup v2 (the process's memory.max; the lowest along the path; a
// namespace whose root is the process's cgroup; "max" everywhere), cgroup
// v1 (the memory controller's limit_in_bytes, a hybrid machine's v2 mount
// with no memory.max, v1's "unlimited" value), GOMEMLIMIT (taken whole,
// the lower of it and the cgroup's), and the machine's memory when
// nothing bounds the process, each less the 10% margin but GOMEMLIMIT.
func TestDetectLimit(t *testing.T) {
	const machine = 24683748 * 1024
	for _, c := range []struct {
		name, sample, gomemlimit string
		want                     int64
		source                   string
	}{
		{"v2 memory.max", "v2", "", 512 << 20 * 9 / 10, SourceCgroupV2},
		{"v2 the lowest along the path", "v2nested", "", 256 << 20 * 9 / 10, SourceCgroupV2},
		{"v2 in a cgroup namespace", "v2ns", "", 1 << 30 * 9 / 10, SourceCgroupV2},
		{"v2 max everywhere: the machine", "v2max", "", machine * 9 / 10, SourceMachine},
		{"v1 on a hybrid machine", "v1", "", 1 << 30 * 9 / 10, SourceCgroupV1},
		{"v1 in a cgroup namespace", "v1ns", "", 2 << 30 * 9 / 10, SourceCgroupV1},
		{"v1 unlimited: the machine", "v1none", "", machine * 9 / 10, SourceMachine},
		{"GOMEMLIMIT below the cgroup's", "v1", "700MiB", 700 << 20, SourceGOMEMLIMIT},
		{"GOMEMLIMIT above the cgroup's", "v2", "2GiB", 512 << 20 * 9 / 10, SourceCgroupV2},
		{"GOMEMLIMIT alone", "v2max", "1073741824", 1 << 30, SourceGOMEMLIMIT},
		{"GOMEMLIMIT=off: the cgroup's", "v2", "off", 512 << 20 * 9 / 10, SourceCgroupV2},
	} {
		a, err := DetectLimit(sample(c.sample, c.gomemlimit))
		// The margin is computed in floating point: within a byte.
		if err != nil || a.Source != c.source || a.Limit < c.want-1 || a.Limit > c.want+1 {
			t.Errorf("%s: %+v (%v), want %d from %s", c.name, a, err, c.want, c.source)
		}
		t.Logf("%s: %s", c.name, a)
	}
	none := Env{ProcCgroup: "testdata/none", CgroupRoot: "testdata/none", MemInfo: "testdata/none"}
	if a, err := DetectLimit(none); err != nil || a.Limit != 0 || a.Source != "" {
		t.Errorf("nothing readable: %+v (%v), want no limit", a, err)
	}
	if _, err := DetectLimit(sample("v2", "12 GiB")); err == nil {
		t.Errorf("GOMEMLIMIT=\"12 GiB\" accepted; the runtime refuses it")
	}
}

// TestParseLimits: the small parsers of outside text, on their edges.
func TestParseLimits(t *testing.T) {
	for in, want := range map[string]int64{"0": -1, "max": -1, "-5": -1, "12\n": 12, " 4096 ": 4096, "9223372036854771712": -1, "4611686018427387903": 4611686018427387903, "1e9": -1, "": -1} {
		n, ok := ParseCgroupLimit([]byte(in))
		if (want < 0) == ok || ok && n != want {
			t.Errorf("ParseCgroupLimit(%q) = %d, %v; want %d", in, n, ok, want)
		}
	}
	for in, want := range map[string]int64{"off": 0, "0": 0, "1024": 1024, "1B": 1, "2KiB": 2048, "3MiB": 3 << 20, "4GiB": 4 << 30, "5TiB": 5 << 40,
		"1.5GiB": -1, "1GB": -1, "GiB": -1, "-1": -1, "+1": -1, "9223372036854775807": 1<<63 - 1, "9223372036854775807KiB": -1, "": -1} {
		n, err := ParseGOMEMLIMIT(in)
		if (want < 0) != (err != nil) || err == nil && n != want {
			t.Errorf("ParseGOMEMLIMIT(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	v2, v1 := ParseProcCgroup([]byte("12:pids:/a\n4:cpu,memory:/docker/x\n0::/docker/x\nbroken\n3:memory:relative\n"))
	if v2 != "/docker/x" || v1 != "/docker/x" {
		t.Errorf("ParseProcCgroup: v2 %q v1 %q", v2, v1)
	}
	if n, ok := ParseMemTotal([]byte("MemFree: 1 kB\nMemTotal:  2048 kB\n")); !ok || n != 2048*1024 {
		t.Errorf("ParseMemTotal = %d, %v", n, ok)
	}
	if _, ok := ParseMemTotal([]byte("MemTotal: 2048 MB\n")); ok {
		t.Errorf("ParseMemTotal took a unit other than kB")
	}
}

// FuzzParseLimits: the parsers of cgroup files, /proc/self/cgroup,
// /proc/meminfo and GOMEMLIMIT never panic, and a limit they accept is
// above 0.
func FuzzParseLimits(f *testing.F) {
	for _, s := range []string{"max", "536870912\n", "9223372036854771712", "0::/a\n4:memory:/b\n", "MemTotal: 1 kB\n", "512MiB", "off"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, ok := ParseCgroupLimit([]byte(s)); ok && n <= 0 {
			t.Errorf("cgroup limit %d from %q", n, s)
		}
		if n, err := ParseGOMEMLIMIT(s); err == nil && n < 0 {
			t.Errorf("GOMEMLIMIT %d from %q", n, s)
		}
		if n, ok := ParseMemTotal([]byte(s)); ok && n <= 0 {
			t.Errorf("MemTotal %d from %q", n, s)
		}
		ParseProcCgroup([]byte(s))
	})
}
