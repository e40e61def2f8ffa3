package dataquery

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
)

// Counts (issue 29, item 3): Prefer: count=exact | planned | estimated,
// as PostgREST reads them.
//
//	exact      SELECT count(*) FROM (SELECT 1 FROM t WHERE ... LIMIT max+1):
//	           never more than max+1 rows read, whatever the table's size;
//	           a count above max is the caller's refusal
//	planned    PostgreSQL's planner estimate: EXPLAIN (FORMAT JSON) of the
//	           filtered statement, its top plan's "Plan Rows"
//	estimated  exact up to max, planned above it
//
// The statements are built from an unpaged Bound (Bind(q, false)): the
// same filters, the same bind arguments, no cursor, order or limit.

// Count modes (Prefer: count=...).
const (
	CountNone      = ""
	CountExact     = "exact"
	CountPlanned   = "planned"
	CountEstimated = "estimated"
)

// maxPreferTokens bounds the preferences read from Prefer headers.
const maxPreferTokens = 32

// ParsePrefer reads the count preference of a request's Prefer header
// values: "" when none. Other preferences are ignored (RFC 7240); a
// count= with another value, or two different ones, is an *Error naming
// Prefer.
func ParsePrefer(values []string) (string, error) {
	mode, n := CountNone, 0
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			if n++; n > maxPreferTokens {
				return "", invalid("Prefer", "more than "+strconv.Itoa(maxPreferTokens)+" preferences")
			}
			tok = strings.TrimSpace(tok)
			name, val, _ := strings.Cut(tok, "=")
			if !strings.EqualFold(strings.TrimSpace(name), "count") {
				continue
			}
			val = strings.Trim(strings.TrimSpace(val), `"`)
			switch val {
			case CountExact, CountPlanned, CountEstimated:
			default:
				return "", invalid("Prefer", "count= takes exact, planned or estimated, not "+quote(val))
			}
			if mode != CountNone && mode != val {
				return "", invalid("Prefer", "count="+mode+" and count="+val+" both asked")
			}
			mode = val
		}
	}
	return mode, nil
}

// CountStatement returns the statement counting the rows of b, an
// unpaged Bound of q, reading at most max+1 of them: its one row holds
// the count, max+1 meaning "more than max".
func CountStatement(q Query, b Bound, max int) (Bound, error) {
	if max < 1 || max >= math.MaxInt32 {
		return Bound{}, errors.New("count: max out of range")
	}
	var bd builder
	switch x := q.(type) {
	case *TableQuery:
		bd = builder{d: x.d, args: append(make([]any, 0, b.nwhere+1), b.Args[:b.nwhere]...)}
		bd.text("SELECT count(*) FROM (SELECT 1 FROM ")
		bd.text(x.from)
		bd.text(b.where)
	case *SQLQuery:
		bd = builder{d: x.d, args: append(make([]any, 0, len(b.Args)+1), b.Args...)}
		bd.text("SELECT count(*) FROM (SELECT 1 FROM (")
		bd.text(b.SQL)
		bd.text(") AS levee_q")
	default:
		return Bound{}, errors.New("count: unknown query type")
	}
	bd.text(" LIMIT ")
	bd.arg(int64(max + 1))
	bd.text(") AS levee_count")
	return Bound{SQL: string(bd.sql), Args: bd.args}, nil
}

// PlanStatement returns the EXPLAIN (FORMAT JSON) of b, an unpaged Bound
// of q (PostgreSQL only): its one row is the plan, ParsePlanRows reads it.
func PlanStatement(q Query, b Bound) (Bound, error) {
	switch x := q.(type) {
	case *TableQuery:
		if x.d != Postgres {
			return Bound{}, errors.New("count=planned needs PostgreSQL's planner")
		}
		return Bound{SQL: "EXPLAIN (FORMAT JSON) SELECT 1 FROM " + x.from + b.where, Args: b.Args[:b.nwhere]}, nil
	case *SQLQuery:
		if x.d != Postgres {
			return Bound{}, errors.New("count=planned needs PostgreSQL's planner")
		}
		return Bound{SQL: "EXPLAIN (FORMAT JSON) " + b.SQL, Args: b.Args}, nil
	}
	return Bound{}, errors.New("plan: unknown query type")
}

// ParsePlanRows reads the top plan's row estimate from EXPLAIN (FORMAT
// JSON)'s output.
func ParsePlanRows(doc []byte) (int64, error) {
	var plans []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(doc, &plans); err != nil || len(plans) == 0 {
		return 0, errors.New("plan: not an EXPLAIN (FORMAT JSON) document")
	}
	r := plans[0].Plan.Rows
	if r < 0 || math.IsNaN(r) || r > math.MaxInt64/2 {
		return 0, errors.New("plan: row estimate out of range")
	}
	return int64(r), nil
}

// ContentRange is PostgREST's Content-Range of an answer: "0-24/3573458"
// for rows 0 to 24 of 3573458; first < 0 when the answer's place is not
// known (a page after a cursor) or it has no rows: "*/3573458".
func ContentRange(first, rows int, total int64) string {
	t := strconv.FormatInt(total, 10)
	if first < 0 || rows <= 0 {
		return "*/" + t
	}
	return strconv.Itoa(first) + "-" + strconv.Itoa(first+rows-1) + "/" + t
}
