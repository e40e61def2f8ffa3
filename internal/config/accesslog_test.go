package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestAccessLogForms: log.access takes true, false or a block, which
// turns the log on with its settings.
func TestAccessLogForms(t *testing.T) {
	file := filepath.Join(t.TempDir(), "access.log")
	for _, c := range []struct {
		access string
		want   Log
	}{
		{"true", Log{Level: "info", Access: true, AccessLog: AccessLog{Output: "stderr", Sample2xx: 1}}},
		{"false", Log{Level: "info", AccessLog: AccessLog{Output: "stderr", Sample2xx: 1}}},
		{"{}", Log{Level: "info", Access: true, AccessLog: AccessLog{Output: "stderr", Sample2xx: 1}}},
		{"{output: stdout, sample_2xx: 0, redact_query: [token, api_key]}",
			Log{Level: "info", Access: true, AccessLog: AccessLog{Output: "stdout", Sample2xx: 0, RedactQuery: []string{"token", "api_key"}}}},
		{"{output: " + file + ", sample_2xx: 0.1}",
			Log{Level: "info", Access: true, AccessLog: AccessLog{Output: file, Sample2xx: 0.1}}},
	} {
		cfg, err := Parse([]byte(head + "log:\n  access: " + c.access + "\n" + upstreams + routes))
		if err != nil {
			t.Errorf("access: %s: %v", c.access, err)
			continue
		}
		if !reflect.DeepEqual(cfg.Log, c.want) {
			t.Errorf("access: %s: got %+v, want %+v", c.access, cfg.Log, c.want)
		}
	}
}

// TestAccessLogOutputChecked: an output levee cannot open for writing is
// refused at parse time, naming the field and the path. A directory is
// refused for root too (the tests run as root in CI, where a read-only file is
// writable); the read-only file is checked where the permission holds.
func TestAccessLogOutputChecked(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro.log")
	if err := os.WriteFile(ro, nil, 0o400); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, why string }{{dir, `must be "stdout", "stderr" or a file, not a directory`}}
	if f, err := os.OpenFile(ro, os.O_WRONLY, 0); err == nil {
		f.Close() // root: permissions do not bind
	} else {
		cases = append(cases, struct{ path, why string }{ro, "cannot write to the file: permission denied"})
	}
	for _, c := range cases {
		_, err := Parse([]byte(head + "log:\n  access: {output: " + c.path + "}\n" + upstreams + routes))
		if want := `log.access.output: ` + c.why + `, got "` + c.path + `"`; err == nil || err.Error() != want {
			t.Errorf("got %v, want %s", err, want)
		}
	}
}
