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

func TestAccessLogOutputChecked(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro.log")
	if err := os.WriteFile(ro, nil, 0o400); err != nil {
		t.Fatal(err)
	}
	if f, err := os.OpenFile(ro, os.O_WRONLY, 0); err == nil {
		f.Close()
		t.Skip("running as root: a read-only file is writable")
	}
	_, err := Parse([]byte(head + "log:\n  access: {output: " + ro + "}\n" + upstreams + routes))
	if want := `log.access.output: cannot write to the file: permission denied, got "` + ro + `"`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
