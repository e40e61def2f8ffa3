package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/levee-gw/levee/internal/testsvc"
)

// pgTypesSQL makes a table of every type a data route renders, with NULLs,
// unicode, a numeric beyond float64 and an integer beyond 2^53.
const pgTypesSQL = `
CREATE TABLE items (
  id int8 PRIMARY KEY, small int2, big int8, price numeric, ratio float8, name text, active bool,
  day date, at timestamptz, ref uuid, meta jsonb, blob bytea);
INSERT INTO items VALUES
  (1, 7, 9007199254740993, 123456789012345678901234567890.000000001, 0.5, 'Zoë ✓ "quoted"', true,
   '2025-02-28', '2025-03-01 12:30:00.123456+02', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"a": [1, 2]}', '\x00ff'),
  (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (3, -3, -9007199254740991, -0.5, -1e300, '', false, '2024-02-29', '1999-12-31 23:59:59Z',
   '00000000-0000-0000-0000-000000000000', '"s"', '\x');
CREATE TABLE people (id int4 PRIMARY KEY, name text, city text, born date, score numeric, active bool,
  joined timestamptz, ref uuid);
INSERT INTO people VALUES
  (1, 'Ana', 'Lisboa', '1990-05-01', 12.5, true, '2025-01-01 00:00:00+00', '11111111-1111-1111-1111-111111111111'),
  (2, 'Zoë', 'Zürich', '1985-12-31', 99999999999999999999.5, false, '2025-06-30 23:00:00-02', '22222222-2222-2222-2222-222222222222'),
  (3, 'O''Brien 100%', NULL, NULL, -1, NULL, NULL, NULL),
  (4, 'an_a', 'Lisboa', '2000-02-29', 0, true, '2024-12-31 23:59:59.999+00', '33333333-3333-3333-3333-333333333333'),
  (5, NULL, 'Oslo', '1970-01-01', 7, false, '1999-01-01 12:00:00+09', '44444444-4444-4444-4444-444444444444');
CREATE TABLE orders (id int8 PRIMARY KEY, customer_id int8 NOT NULL, total numeric NOT NULL, created_at timestamptz NOT NULL);
INSERT INTO orders SELECT g, 1 + g % 5, g * 1.5, timestamptz '2025-01-01' + g * interval '1 hour' FROM generate_series(1, 200) g;
`

func pgGatewayYAML(dsn, stateDir string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  sales:
    driver: postgres
    dsn: %s
    max_conns: 4
    statement_timeout: 2s
    connect_timeout: 500ms
routes:
  - name: items
    match: {path_prefix: /v1/items}
    data:
      source: sales
      sql: SELECT * FROM items WHERE id IN (:ids) ORDER BY id
      params:
        ids: {type: int64, list: true, required: true}
  - name: typed
    match: {path_prefix: /v1/typed}
    data:
      source: sales
      sql: >-
        SELECT id FROM items WHERE day >= :day AND at < :at AND ref <> :ref AND price > :price
        AND active = :active AND name <> :name ORDER BY id
      params:
        day: {type: date, required: true}
        at: {type: timestamp, required: true}
        ref: {type: uuid, required: true}
        price: {type: float64, required: true}
        active: {type: bool, required: true}
        name: {type: string, required: true, max_len: 16}
  - name: orders
    match: {path_prefix: /v1/orders}
    data:
      source: sales
      sql: SELECT id, customer_id, total, created_at FROM orders WHERE customer_id = :customer_id ORDER BY created_at DESC, id DESC
      params:
        customer_id: {type: int64, required: true, min: 1}
      page: {keyset: [created_at, id], default: 10, max: 100}
      cache: {ttl: 1ms, stale_if_error: 1h}
  - name: people
    match: {path_prefix: /v1/people}
    data:
      source: sales
      table: people
      columns: [id, name, city, born, score, active, joined, ref]
      filters:
        id: [eq, neq, lt, lte, gt, gte, in]
        name: [eq, like, is]
        city: [eq, neq, in, is]
        born: [lt, gte]
        score: [gt, lte, eq]
        active: [is, eq]
        joined: [gte, lt]
        ref: [eq]
      order: [id]
  - name: slow
    match: {path_prefix: /v1/slow}
    data:
      source: sales
      sql: SELECT pg_sleep(:seconds)::text AS slept
      params:
        seconds: {type: float64, required: true, min: 0, max: 5}
      statement_timeout: 200ms
`, dataQuote(stateDir), dataQuote(dsn))
}

// TestDataRouteOverPostgres (issue 16): data routes over a real
// PostgreSQL, through a real levee.
func TestDataRouteOverPostgres(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, pgTypesSQL)
	h := start(t, pgGatewayYAML(pg.DSN, t.TempDir()))

	t.Run("values as the database renders them", func(t *testing.T) {
		status, _, body := dataGet(t, h, "/v1/items?ids=1,2,3", "")
		var page jsonPage
		if status != 200 || json.Unmarshal(body, &page) != nil || len(page.Rows) != 3 {
			t.Fatalf("%d %s", status, body)
		}
		one, null, three := page.Rows[0], page.Rows[1], page.Rows[2]
		want := map[string]any{
			"small": float64(7), "big": "9007199254740993", "price": "123456789012345678901234567890.000000001",
			"ratio": 0.5, "name": `Zoë ✓ "quoted"`, "active": true, "day": "2025-02-28",
			"at": "2025-03-01T10:30:00.123456Z", "ref": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
			"blob": "AP8=",
		}
		for k, v := range want {
			if fmt.Sprint(one[k]) != fmt.Sprint(v) {
				t.Errorf("%s = %#v, want %#v", k, one[k], v)
			}
		}
		if m, _ := json.Marshal(one["meta"]); string(m) != `{"a":[1,2]}` {
			t.Errorf("meta = %s", m)
		}
		for k, v := range null {
			if k != "id" && v != nil {
				t.Errorf("row 2: %s = %#v, want null", k, v)
			}
		}
		if three["big"] != -9007199254740991.0 || three["ratio"] != -1e300 || three["at"] != "1999-12-31T23:59:59Z" || three["name"] != "" {
			t.Errorf("row 3 = %v", three)
		}
		// The reference: PostgreSQL's own text for the numeric.
		if ref := pg.QueryText(t, "SELECT price::text FROM items WHERE id = 1"); *ref[0][0] != one["price"] {
			t.Errorf("price %v, the database renders %s", one["price"], *ref[0][0])
		}
	})

	t.Run("every parameter type binds", func(t *testing.T) {
		q := url.Values{"day": {"2024-01-01"}, "at": {"2030-01-01T00:00:00+01:00"}, "ref": {"11111111-1111-1111-1111-111111111111"},
			"price": {"-1"}, "active": {"false"}, "name": {"x"}}
		status, _, body := dataGet(t, h, "/v1/typed?"+q.Encode(), "application/x-ndjson")
		if status != 200 || strings.TrimSpace(string(body)) != `{"id":3}` {
			t.Errorf("%d %q, want row 3", status, body)
		}
		q.Set("name", strings.Repeat("x", 17))
		if status, _, body := dataGet(t, h, "/v1/typed?"+q.Encode(), ""); status != 400 || !strings.Contains(string(body), `"parameter":"name"`) {
			t.Errorf("name over max_len: %d %s", status, body)
		}
		for _, bad := range []string{"'; DELETE FROM items; --", "1 OR 1=1", "\x00"} {
			q.Set("name", "x")
			q.Set("ref", bad)
			if status, _, _ := dataGet(t, h, "/v1/typed?"+q.Encode(), ""); status != 400 {
				t.Errorf("ref=%q: %d, want 400", bad, status)
			}
		}
		if n := pg.QueryText(t, "SELECT count(*) FROM items"); *n[0][0] != "3" {
			t.Errorf("items has %s rows", *n[0][0])
		}
	})

	t.Run("every operator answers as the database does", func(t *testing.T) {
		for _, c := range []struct{ query, where string }{
			{"id=eq.2", "id = 2"},
			{"id=neq.2", "id <> 2"},
			{"id=lt.3", "id < 3"},
			{"id=lte.3", "id <= 3"},
			{"id=gt.3", "id > 3"},
			{"id=gte.3&id=lt.5", "id >= 3 AND id < 5"},
			{"id=in.(1,3,5)", "id IN (1, 3, 5)"},
			{"name=eq.Zoë", "name = 'Zoë'"},
			{"name=like.*100%25", `name LIKE '%100\%'`},
			{"name=like.an_*", `name LIKE 'an\_%'`},
			{"name=is.null", "name IS NULL"},
			{"city=neq.Lisboa", "city <> 'Lisboa'"},
			{"city=in.(Lisboa,Zürich)", "city IN ('Lisboa', 'Zürich')"},
			{"city=is.null", "city IS NULL"},
			{"born=lt.1990-01-01", "born < '1990-01-01'"},
			{"born=gte.2000-02-29", "born >= '2000-02-29'"},
			{"score=gt.99999999999999999999", "score > 99999999999999999999"},
			{"score=lte.0", "score <= 0"},
			{"score=eq.12.5", "score = 12.5"},
			{"active=is.true", "active IS TRUE"},
			{"active=is.false", "active IS FALSE"},
			{"active=eq.false", "active = false"},
			{"joined=gte.2025-01-01T00:00:00Z", "joined >= '2025-01-01T00:00:00Z'"},
			{"joined=lt.2025-01-01T09:00:00%2B09:00", "joined < '2025-01-01T09:00:00+09:00'"},
			{"ref=eq.22222222-2222-2222-2222-222222222222", "ref = '22222222-2222-2222-2222-222222222222'"},
		} {
			var want []string
			for _, row := range pg.QueryText(t, "SELECT id FROM people WHERE "+c.where+" ORDER BY id") {
				want = append(want, *row[0])
			}
			status, _, body := dataGet(t, h, "/v1/people?"+c.query, "application/x-ndjson")
			if status != 200 {
				t.Errorf("?%s: %d %s", c.query, status, body)
				continue
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
				if line == "" {
					continue
				}
				var r map[string]any
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("?%s: %q: %v", c.query, line, err)
				}
				got = append(got, fmt.Sprint(r["id"]))
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("?%s: ids %v, the database's WHERE %s: %v", c.query, got, c.where, want)
			}
		}
		// The same row in the three formats.
		_, _, j := dataGet(t, h, "/v1/people?id=eq.2", "application/json")
		_, _, n := dataGet(t, h, "/v1/people?id=eq.2", "application/x-ndjson")
		_, _, c := dataGet(t, h, "/v1/people?id=eq.2", "text/csv")
		wantRow := `{"id":2,"name":"Zoë","city":"Zürich","born":"1985-12-31","score":"99999999999999999999.5","active":false,"joined":"2025-07-01T01:00:00Z","ref":"22222222-2222-2222-2222-222222222222"}`
		if !strings.Contains(string(j), wantRow) || strings.TrimSpace(string(n)) != wantRow {
			t.Errorf("JSON %s\nNDJSON %s\nwant the row %s", j, n, wantRow)
		}
		if want := "id,name,city,born,score,active,joined,ref\r\n2,Zoë,Zürich,1985-12-31,99999999999999999999.5,false,2025-07-01T01:00:00Z,22222222-2222-2222-2222-222222222222\r\n"; string(c) != want {
			t.Errorf("CSV %q, want %q", c, want)
		}
	})

	t.Run("statement timeout cancels in the database", func(t *testing.T) {
		// pg_sleep(3) would answer 200 after 3 s: the 504 is the 200ms timeout.
		status, _, body := dataGet(t, h, "/v1/slow?seconds=3", "")
		if status != 504 || !strings.Contains(string(body), `"statement_timeout"`) {
			t.Errorf("%d %s, want 504 statement_timeout", status, body)
		}
		waitFor(t, "no pg_sleep left running", func() bool {
			n := pg.QueryText(t, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep%' AND state = 'active' AND pid <> pg_backend_pid()")
			return *n[0][0] == "0"
		})
	})

	t.Run("never more connections than max_conns", func(t *testing.T) {
		most := sampleLeveeConns(t, pg.DSN)
		var wg sync.WaitGroup
		for range 24 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 {
					dataGet(t, h, "/v1/slow?seconds=0.05", "")
				}
			}()
		}
		wg.Wait()
		n := most()
		if n > 4 || n == 0 {
			t.Errorf("levee held up to %d connections, max_conns is 4", n)
		}
	})

	t.Run("stale while the database is down, then recovered", func(t *testing.T) {
		status, hdr, fresh := dataGet(t, h, "/v1/orders?customer_id=2", "")
		if status != 200 || hdr.Get("Levee-Cache") != "miss" {
			t.Fatalf("first: %d %q", status, hdr.Get("Levee-Cache"))
		}
		pg.Stop() // and the entry is past its 1ms ttl: only stale_if_error serves it now
		status, hdr, body := dataGet(t, h, "/v1/orders?customer_id=2", "")
		if status != 200 || hdr.Get("Levee-Cache") != "stale" || hdr.Get("Age") == "" || string(body) != string(fresh) {
			t.Errorf("database down, cached: %d %q Age %q", status, hdr.Get("Levee-Cache"), hdr.Get("Age"))
		}
		status, hdr, body = dataGet(t, h, "/v1/orders?customer_id=3", "")
		if status != 503 || !strings.Contains(string(body), `"data_source_unavailable"`) || hdr.Get("Retry-After") == "" {
			t.Errorf("database down, nothing cached: %d %s Retry-After %q", status, body, hdr.Get("Retry-After"))
		}
		if err := pg.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "answers again after the database is back", func() bool {
			status, _, _ := dataGet(t, h, "/v1/orders?customer_id=3", "")
			return status == 200
		})
	})
}

// sampleLeveeConns counts levee's sessions in pg_stat_activity every 10 ms
// on a connection of its own until the returned function is called, which
// stops it and returns the most seen.
func sampleLeveeConns(t *testing.T, dsn string) func() int64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var most atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var n int64
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'levee'").Scan(&n); err == nil && n > most.Load() {
				most.Store(n)
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	stopped := false
	stop := func() int64 {
		if !stopped {
			stopped = true
			cancel()
			<-done
			conn.Close(context.Background())
		}
		return most.Load()
	}
	t.Cleanup(func() { stop() })
	return stop
}
