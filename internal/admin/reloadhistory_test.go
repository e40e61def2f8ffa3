package admin

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestReloadHistoryBounded: the history keeps the last reloadHistoryLen
// loads, newest first, and bounds what a refused one keeps of its error
// (lines and bytes per line).
func TestReloadHistoryBounded(t *testing.T) {
	var h ReloadHistory
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	h.Add(t0, "start", nil)
	if l := h.List(); len(l) != 1 || l[0].Result != "start" || l[0].Problems != nil {
		t.Fatalf("after start: %+v", l)
	}
	long := strings.Repeat("é", maxReloadProblemBytes) // 2 bytes each: cut mid-rune
	lines := []string{long}
	for i := range 3 * maxReloadProblems {
		lines = append(lines, "problem "+string(rune('a'+i%26)))
	}
	for i := 1; i <= reloadHistoryLen+5; i++ {
		var err error
		if i%2 == 0 {
			err = errors.New(strings.Join(lines, "\n"))
		}
		result := "success"
		if err != nil {
			result = "error"
		}
		h.Add(t0.Add(time.Duration(i)*time.Second), result, err)
	}
	l := h.List()
	if len(l) != reloadHistoryLen {
		t.Fatalf("%d entries, want %d", len(l), reloadHistoryLen)
	}
	for i, v := range l {
		want := t0.Add(time.Duration(reloadHistoryLen+5-i) * time.Second)
		if !v.Time.Equal(want) {
			t.Fatalf("entry %d at %v, want %v (newest first)", i, v.Time, want)
		}
		if v.Result == "error" {
			if len(v.Problems) != maxReloadProblems+1 || !strings.Contains(v.Problems[maxReloadProblems], "more") {
				t.Fatalf("entry %d keeps %d problems, want %d and a count of the rest", i, len(v.Problems), maxReloadProblems+1)
			}
			if p := v.Problems[0]; len(p) > maxReloadProblemBytes+3 || !strings.HasSuffix(p, "...") || !strings.HasPrefix(p, "éé") || strings.ContainsRune(p, '\uFFFD') {
				t.Fatalf("a long line kept as %d bytes %q", len(p), p[:10])
			}
		}
	}
}
