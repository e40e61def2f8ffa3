package discovery

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sample() []Instance {
	return []Instance{
		{Address: "10.0.0.5:8080", Weight: 300, Zone: "a", Metadata: map[string]string{"version": "v2", "quote": `"]}`}},
		{Address: "[2001:db8::1]:80", Weight: 0},
		{Address: "web-1.example.com:443", Weight: 5},
		{Address: "web-2.example.com:443", Weight: 1000000},
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if err := WriteSnapshot(dir, "video", sample()); err != nil {
		t.Fatal(err)
	}
	got, mtime, err := ReadSnapshot(dir, "video", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sample()) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, sample())
	}
	st, _ := os.Stat(filepath.Join(dir, "video.json"))
	if !mtime.Equal(st.ModTime()) {
		t.Fatalf("mtime %v, file %v", mtime, st.ModTime())
	}
	// Overwrite; an empty list is a valid snapshot.
	if err := WriteSnapshot(dir, "video", nil); err != nil {
		t.Fatal(err)
	}
	if got, _, err := ReadSnapshot(dir, "video", Limits{}); err != nil || len(got) != 0 {
		t.Fatalf("empty snapshot: %v, %v", got, err)
	}
	assertNoTemp(t, dir)
}

func TestSnapshotMissing(t *testing.T) {
	_, _, err := ReadSnapshot(t.TempDir(), "video", Limits{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

// TestSnapshotTampered: a snapshot goes through the same parser as any
// payload, and any rejection refuses it whole.
func TestSnapshotTampered(t *testing.T) {
	for name, content := range map[string]string{
		"truncated":     `[{"address": "10.0.0.5:8080", "wei`,
		"not an array":  `{"address": "10.0.0.5:8080"}`,
		"string weight": `[{"address": "10.0.0.5:8080", "weight": "abc"}, {"address": "10.0.0.6:8080"}]`,
		"too large":     `[{"address": "10.0.0.5:8080", "weight": 1e5}, {"address": "10.0.0.6:8080"}]`,
		"duplicate":     `[{"address": "10.0.0.5:8080"}, {"address": "10.0.0.5:8080"}]`,
		"deep":          strings.Repeat("[", 1000),
		"binary":        "\x00\x01\xff",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "video.json"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, _, err := ReadSnapshot(dir, "video", Limits{})
		if !errors.Is(err, ErrCorruptSnapshot) || got != nil {
			t.Errorf("%s: got %v, %v; want ErrCorruptSnapshot", name, got, err)
		}
	}
	// A directory where the file should be.
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "video.json"), 0o755)
	if _, _, err := ReadSnapshot(dir, "video", Limits{}); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("directory: %v", err)
	}
	// A file larger than the payload limit is refused before it is read.
	os.WriteFile(filepath.Join(dir, "big.json"), []byte(`[`+strings.Repeat(" ", 100)+`]`), 0o644)
	if _, _, err := ReadSnapshot(dir, "big", Limits{MaxPayloadBytes: 50}); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("big: %v", err)
	}
}

// TestSnapshotLimits: the upstream's own MaxWeight applies on read.
func TestSnapshotLimits(t *testing.T) {
	dir := t.TempDir()
	heavy := []Instance{{Address: "10.0.0.5:8080", Weight: 5_000_000}} // 50000
	if err := WriteSnapshot(dir, "video", heavy); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadSnapshot(dir, "video", Limits{}); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("default limits: %v", err)
	}
	if got, _, err := ReadSnapshot(dir, "video", Limits{MaxWeight: 50000}); err != nil || !reflect.DeepEqual(got, heavy) {
		t.Fatalf("MaxWeight 50000: %v, %v", got, err)
	}
}

func TestSnapshotNames(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"", "../etc", "a/b", "Video", "a b", strings.Repeat("a", 65), "é"} {
		if err := WriteSnapshot(dir, name, sample()); err == nil {
			t.Errorf("WriteSnapshot accepted name %q", name)
		}
		if _, _, err := ReadSnapshot(dir, name, Limits{}); err == nil {
			t.Errorf("ReadSnapshot accepted name %q", name)
		}
	}
	for _, name := range []string{".", "..", "a.b_c-1", strings.Repeat("a", 64)} {
		if err := WriteSnapshot(dir, name, sample()); err != nil {
			t.Errorf("name %q: %v", name, err)
		}
		if _, _, err := ReadSnapshot(dir, name, Limits{}); err != nil {
			t.Errorf("name %q: %v", name, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("unexpected directory %s", e.Name())
		}
	}
}

// TestSnapshotAtomic: a write that fails halfway leaves the old snapshot
// intact and no temporary file behind.
func TestSnapshotAtomic(t *testing.T) {
	dir := t.TempDir()
	if err := WriteSnapshot(dir, "video", sample()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "video.json")
	old, _ := os.ReadFile(path)
	data, _ := MarshalList(sample()[:1])
	boom := errors.New("disk full")
	err := replaceFile(path, data, func(f *os.File, b []byte) error {
		f.Write(b[:len(b)/2])
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if now, _ := os.ReadFile(path); string(now) != string(old) {
		t.Fatal("old snapshot changed by a failed write")
	}
	assertNoTemp(t, dir)
	if _, _, err := ReadSnapshot(dir, "video", Limits{}); err != nil {
		t.Fatal(err)
	}

	// A read-only directory (meaningless for root, which ignores modes).
	if os.Geteuid() == 0 {
		return
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	if err := WriteSnapshot(dir, "video", sample()[:1]); err == nil {
		t.Fatal("write to a read-only directory succeeded")
	}
	if now, _ := os.ReadFile(path); string(now) != string(old) {
		t.Fatal("old snapshot changed")
	}
	assertNoTemp(t, dir)
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}
