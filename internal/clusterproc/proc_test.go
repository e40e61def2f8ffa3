package clusterproc

import (
	"strings"
	"testing"
)

// TestLogTailFindsListening: the "levee listening" line is found when it
// arrives in pieces after more output than the tail keeps; the tail stays
// within its bound and ends with what was written last; a longer line
// than lineMax is not taken for it.
func TestLogTailFindsListening(t *testing.T) {
	var l logTail
	noise := strings.Repeat(`{"msg":"noise"}`+"\n", 2*tailMax/16)
	l.Write([]byte(noise))
	long := `{"msg":"levee listening","data":"bad","pad":"` + strings.Repeat("a", lineMax) + `"}` + "\n"
	l.Write([]byte(long))             // in one write
	l.Write([]byte(long[:lineMax/2])) // and in pieces
	l.Write([]byte(long[lineMax/2:]))
	if l.listening() != nil {
		t.Fatal("listening taken from noise or from a line over lineMax")
	}
	line := `{"time":"t","level":"INFO","msg":"levee listening","data":"127.0.0.1:1234","admin":"127.0.0.1:5678","tls":false}` + "\n"
	for i := 0; i < len(line); i += 7 {
		l.Write([]byte(line[i:min(i+7, len(line))]))
	}
	got := l.listening()
	if got == nil || got.Data != "127.0.0.1:1234" || got.Admin != "127.0.0.1:5678" {
		t.Fatalf("listening = %+v", got)
	}
	if s := l.String(); len(s) > tailMax || !strings.HasSuffix(s, line) {
		t.Fatalf("tail of %d bytes (max %d), ends with the last line: %v", len(s), tailMax, strings.HasSuffix(s, line))
	}
}
