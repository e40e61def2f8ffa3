package clusterlimit

// limitScript decides a batch of requests, in order, each against up to
// maxChecks limit keys, and records them: the same GCRA and fixed-window
// quota as package ratelimit (docs/ratelimits.md), the same order (each
// key's rate, then its quota; a refusal stops there and later keys are
// untouched; a quota refusal keeps the rate token) and the same choice of
// the decision to report (the one with the fewest remaining). Atomic:
// Redis runs a script alone, so every node's requests for a key are
// serialised here. One EVALSHA decides every request a sender took from
// the queue (batch.go): Redis pays the script call's own cost (about as
// much as one decision's) once per batch, not once per request; and a key
// several of the batch's requests use is read and written once per batch
// (load, flush).
//
// Time is Redis's (TIME, read once per batch), so the nodes' clocks do not
// matter. Lua numbers are doubles, exact only below 2^53, and Unix
// nanoseconds (~1.8e18) are not; so a theoretical arrival time is kept as
// whole seconds ("ts") and nanoseconds ("tn"), every difference is taken
// in nanoseconds relative to now (exact while it is below 2^53 ns, 104
// days: a burst window longer than that is rounded to within a
// microsecond), and quota windows are computed in microseconds ("qe": the
// window's end, "qc": its count; Unix microseconds are exact). Integers
// are written with %d, never Lua's default 14-digit format.
//
// ARGV[1]: m, the requests in the batch. Then, for each request in turn,
// its arguments and keys:
// ARGV: now as seconds and microseconds, for the package's tests only
// (stepping time; empty: TIME); how long a signature is remembered, in ms
// (empty: no signature); n; then for each of the n keys: the interval T
// and L = burst·T in ns (0, 0: no rate), the burst, the quota's requests
// (0: none) and its window in µs.
// KEYS: the n keys' state hashes, then the signature's key when the
// request has one.
//
// Returns one answer per request: {1} when the signature was seen before
// (nothing is recorded), else {0, allowed, limit, remaining, reset ns,
// retry-after ns, quota}.
const limitScript = `
local E9 = 1000000000
local tsec, tusec

-- floor(a / b) for integers a >= 0, b > 0, exact below 2^53 (the double
-- quotient can round up to the next integer; one step corrects it).
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local function int(x) return string.format('%d', x) end

-- The keys' state for the batch: read from Redis at a key's first use,
-- then kept here, and written back once, after the last decision (flush):
-- a key that several requests of the batch share (one app's burst) costs
-- one HMGET, one HSET and one PEXPIRE per batch, not per request. Each
-- entry: ts, tn, qe, qc (nil: absent), the fields written since the read
-- (wr), and the TTL the last decision that recorded on it asked for (ms).
local state, order = {}, {}

local function load(key)
  local e = state[key]
  if not e then
    local st = redis.call('HMGET', key, 'ts', 'tn', 'qe', 'qc')
    e = {ts = tonumber(st[1]), tn = tonumber(st[2]), qe = tonumber(st[3]), qc = tonumber(st[4])}
    state[key] = e
    order[#order + 1] = key
  end
  return e
end

-- expire keeps a key as long as its state matters (its TAT ahead of now,
-- its quota window), plus a second: Redis memory stays bounded by the
-- keys in use. now is sec (s), nsn (ns) and nowus (µs). Recorded on the
-- entry; flush sets it.
local function expire(e, sec, nsn, nowus)
  local ms = 0
  if e.ts then
    ms = math.max(ms, math.ceil(((e.ts - sec) * E9 + (e.tn - nsn)) / 1000000))
  end
  if e.qe then
    ms = math.max(ms, math.ceil((e.qe - nowus) / 1000))
  end
  e.ms = ms + 1000
end

-- flush writes back what the batch's decisions recorded, in the order the
-- keys were first used.
local function flush()
  for _, key in ipairs(order) do
    local e = state[key]
    if e.wr then
      local f = {}
      if e.wr.rate then f[#f + 1] = 'ts'; f[#f + 1] = int(e.ts); f[#f + 1] = 'tn'; f[#f + 1] = int(e.tn) end
      if e.wr.quota then f[#f + 1] = 'qe'; f[#f + 1] = int(e.qe); f[#f + 1] = 'qc'; f[#f + 1] = int(e.qc) end
      redis.call('HSET', key, unpack(f))
    end
    if e.ms then
      redis.call('PEXPIRE', key, int(e.ms))
    end
  end
end

-- decide decides the request whose arguments start after ARGV[a] and keys
-- after KEYS[k].
local function decide(a, k)
  local sec, usec
  if ARGV[a + 1] ~= '' then
    sec, usec = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  else
    if not tsec then
      local t = redis.call('TIME')
      tsec, tusec = tonumber(t[1]), tonumber(t[2])
    end
    sec, usec = tsec, tusec
  end
  local n = tonumber(ARGV[a + 4])
  if ARGV[a + 3] ~= '' then
    if not redis.call('SET', KEYS[k + n + 1], '1', 'NX', 'PX', ARGV[a + 3]) then
      return {1}
    end
  end
  local nsn = usec * 1000
  local nowus = sec * 1000000 + usec

  local best
  for i = 1, n do
    local b = a + 4 + (i - 1) * 5
    local T, L, burst = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
    local qn, qper = tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5])
    local e = load(KEYS[k + i])
    local ts, tn, qe, qc = e.ts, e.tn, e.qe, e.qc
    local dr, dq
    if T > 0 then
      local ahead = 0
      if ts then
        ahead = (ts - sec) * E9 + (tn - nsn)
        if ahead < 0 then ahead = 0 end
      end
      local nxt = ahead + T
      if nxt > L then
        local rem = 0
        if L - ahead > 0 then rem = fdiv(L - ahead, T) end
        return {0, 0, burst, rem, ahead, nxt - L, 0}
      end
      local total = nsn + nxt
      local carry = fdiv(total, E9)
      ts, tn = sec + carry, total - carry * E9
      e.ts, e.tn = ts, tn
      e.wr = e.wr or {}
      e.wr.rate = true
      dr = {0, 1, burst, fdiv(L - nxt, T), nxt, 0, 0}
    end
    if qn > 0 then
      local wend = (fdiv(nowus, qper) + 1) * qper
      local count = qc or 0
      if qe ~= wend then count = 0 end
      local reset = (wend - nowus) * 1000
      if count >= qn then
        if dr then expire(e, sec, nsn, nowus) end
        return {0, 0, qn, 0, reset, reset, 1}
      end
      count = count + 1
      qe = wend
      e.qe, e.qc = qe, count
      e.wr = e.wr or {}
      e.wr.quota = true
      dq = {0, 1, qn, qn - count, reset, 0, 1}
    end
    expire(e, sec, nsn, nowus)
    local d = dr or dq
    if dr and dq then
      if dr[4] < dq[4] or (dr[4] == dq[4] and dr[5] > dq[5]) then d = dr else d = dq end
    end
    if not best or d[4] < best[4] then best = d end
  end
  if not best then return {0, 1, 0, 0, 0, 0, 0} end
  return best
end

local out = {}
local a, k = 1, 0
for j = 1, tonumber(ARGV[1]) do
  out[j] = decide(a, k)
  local n = tonumber(ARGV[a + 4])
  k = k + n
  if ARGV[a + 3] ~= '' then k = k + 1 end
  a = a + 4 + 5 * n
end
flush()
return out
`

// heartbeatScript records this node as alive at Redis's time and returns
// how many nodes were heard from within the last ARGV[2] ms, dropping the
// others: the set holds at most the nodes that beat within that window.
// KEYS[1]: the set; ARGV[1]: the node's id; ARGV[2]: the window in ms.
const heartbeatScript = `
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], string.format('%d', ms), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%d', ms - tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1])
`
