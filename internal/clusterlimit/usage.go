package clusterlimit

import (
	"context"
	"strconv"
	"time"
)

// usageScript charges rows and bytes to a key's counts of one window (the
// row and byte quotas of limits.quota), granting at most what fits under
// each limit (0: not counted); a negative ask gives back what an answer
// did not use (never below 0). It answers {granted rows, granted bytes,
// rows used, bytes used}. KEYS: the rows count, the bytes count; ARGV:
// rows ask, bytes ask, row limit, byte limit, expiry (Unix ms: the
// window's end plus a minute).
var usageScript = newScript(`
local out = {0, 0, 0, 0}
for i = 1, 2 do
  local ask, lim = tonumber(ARGV[i]), tonumber(ARGV[i + 2])
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  local got = ask
  if ask > 0 and lim > 0 and used + ask > lim then got = math.max(0, lim - used) end
  if ask < 0 then got = math.max(ask, -used) end
  if got ~= 0 then
    used = redis.call('INCRBY', KEYS[i], got)
    redis.call('PEXPIREAT', KEYS[i], ARGV[5])
  end
  out[i] = got
  out[i + 2] = used
end
return out
`)

// Charge adds rows and bytes to key's counts of the window ending at end
// (Unix nanoseconds, the same on every node: windows are aligned to the
// epoch), granting at most what fits under rowLimit and byteLimit (0: not
// counted); an ask of 0 and 0 reads the counts. It returns the rows and
// bytes granted (negative: given back) and the window's counts after the
// charge. ok is false when Redis
// did not answer within Timeout or the breaker is open: the caller then
// counts on its own node.
func (l *Limiter) Charge(ctx context.Context, key string, end, rows, bytes, rowLimit, byteLimit int64) (gotRows, gotBytes, usedRows, usedBytes int64, ok bool) {
	if l.open.Load() {
		return 0, 0, 0, 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
	defer cancel()
	base := l.o.Prefix + "u:" + key + ":" + strconv.FormatInt(end, 10)
	expire := time.Unix(0, end).Add(time.Minute).UnixMilli()
	v, err := l.run(ctx, usageScript, []string{base + ":r", base + ":b"}, []any{rows, bytes, rowLimit, byteLimit, expire})
	if err != nil {
		l.failed(err)
		return 0, 0, 0, 0, false
	}
	a, isArr := v.([]any)
	if !isArr || len(a) != 4 {
		return 0, 0, 0, 0, false
	}
	var n [4]int64
	for i, e := range a {
		x, isInt := e.(int64)
		if !isInt {
			return 0, 0, 0, 0, false
		}
		n[i] = x
	}
	return n[0], n[1], n[2], n[3], true
}
