package testsvc

import (
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

func TestPostgresStartsStopsRestarts(t *testing.T) {
	var dir string
	t.Run("cluster", func(t *testing.T) {
		start := time.Now()
		p := StartPostgres(t)
		dir = p.dir
		t.Logf("cold start (initdb + start) %v", time.Since(start))
		p.Exec(t, "CREATE TABLE kept (id int, s text); INSERT INTO kept VALUES (1, 'a'), (2, NULL)")
		rows := p.QueryText(t, "SELECT id, s FROM kept ORDER BY id")
		if len(rows) != 2 || *rows[0][0] != "1" || *rows[0][1] != "a" || rows[1][1] != nil {
			t.Fatalf("rows = %v", rows)
		}
		p.Stop()
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p.Port), time.Second); err == nil {
			c.Close()
			t.Fatal("port still accepting after Stop")
		}
		start = time.Now()
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Logf("restart %v", time.Since(start))
		if rows := p.QueryText(t, "SELECT count(*) FROM kept"); *rows[0][0] != "2" {
			t.Fatalf("after restart rows = %v", rows)
		}
	})
	if dir == "" {
		return // skipped
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s left behind after the test", dir)
	}
}
