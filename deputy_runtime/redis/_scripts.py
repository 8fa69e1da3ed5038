"""The Lua scripts: every state change of a lease or a ledger is one atomic script.

Rules the scripts keep:

* Every number handed to ``redis.call`` or stored goes through ``fmt`` (``%d``), never
  through Lua's own number-to-string conversion, which writes large integers in exponent
  form.
* Time comes from the server (``TIME``), so the expiry of a reservation does not depend on
  the clocks of the processes that share it.
* Every script is idempotent for its holder id, so a reply lost to a dropped connection
  can be retried without counting or granting anything twice.
* The holder's W3C ``traceparent`` (empty: none) is stored after a newline, which no
  holder id contains, in the same write as the lease or reservation; compare-and-delete
  and renewal compare only the part before it.

Key layout (``ns`` is the namespace, ``K`` a lease key, ``N`` a budget name)::

    ns:lease:K        string "token:holder" or "token:holder\ntraceparent", expires after
                      the lease TTL
    ns:fence:K        integer, the last fencing token granted on K (never expires)
    ns:budget:N       hash: limit:F, remaining:F, reserved:F, used:F per field F
    ns:budget:N:holds hash: holder -> "g1,g2,g3,g4,g5" (the grant; -1 = unlimited), then
                      "\ntraceparent" when the holder had one
    ns:budget:N:exp   sorted set: holder -> expiry (server ms)
    ns:budget:N:ended hash: holder -> "e" (expired, grant returned) or "s" (settled)
    ns:budget:N:endat sorted set: holder -> when it ended (server ms), to trim "ended"
"""

from __future__ import annotations

# Ledger field order, shared by Python and Lua. cost_usd is stored in micro-dollars.
FIELDS = ("requests", "tool_calls", "input_tokens", "output_tokens", "cost_usd")

_PRELUDE = r"""
local function fmt(n) return string.format('%d', n) end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local FIELDS = {'requests', 'tool_calls', 'input_tokens', 'output_tokens', 'cost_usd'}

local function split(s)
  s = string.match(s, '^[^\n]*')
  local out = {}
  for part in string.gmatch(s, '[^,]+') do out[#out + 1] = tonumber(part) end
  return out
end

-- "token:holder" without the traceparent after it.
local function owner(value)
  return string.match(value, '^[^\n]*')
end

local function with_trace(value, trace)
  if trace == nil or trace == '' then return value end
  return value .. '\n' .. trace
end

local function acquire(lease_key, fence_key, holder, ttl, trace)
  local cur = redis.call('GET', lease_key)
  if cur then
    cur = owner(cur)
    local sep = string.find(cur, ':', 1, true)
    if string.sub(cur, sep + 1) == holder then
      redis.call('PEXPIRE', lease_key, ttl)
      return tonumber(string.sub(cur, 1, sep - 1)), 0
    end
    return nil, redis.call('PTTL', lease_key)
  end
  if redis.call('EXISTS', fence_key) == 0 then
    -- Seeded from the server clock in microseconds: if the server lost its data, tokens
    -- granted afterwards are still larger than every token granted before.
    local t = redis.call('TIME')
    redis.call('SET', fence_key, t[1] .. string.format('%06d', tonumber(t[2])))
  end
  local token = redis.call('INCR', fence_key)
  redis.call('SET', lease_key, with_trace(fmt(token) .. ':' .. holder, trace), 'PX', ttl)
  return token, 0
end

local function release(lease_key, value)
  local cur = redis.call('GET', lease_key)
  if cur and owner(cur) == value then
    redis.call('DEL', lease_key)
    return 1
  end
  return 0
end

-- Return the grants of every reservation whose expiry passed; each one exactly once,
-- since the holder leaves "holds" and "exp" in the same step.
local function reclaim(b, holds, exp, ended, endat, now, keep_ms)
  local gone = redis.call('ZRANGEBYSCORE', exp, '-inf', fmt(now))
  for _, h in ipairs(gone) do
    local enc = redis.call('HGET', holds, h)
    if enc then
      local g = split(enc)
      for i, f in ipairs(FIELDS) do
        if g[i] >= 0 then
          redis.call('HINCRBY', b, 'remaining:' .. f, fmt(g[i]))
          redis.call('HINCRBY', b, 'reserved:' .. f, fmt(-g[i]))
        end
      end
      redis.call('HDEL', holds, h)
      redis.call('HSET', ended, h, 'e')
      redis.call('ZADD', endat, fmt(now), h)
    end
    redis.call('ZREM', exp, h)
  end
  local old = redis.call('ZRANGEBYSCORE', endat, '-inf', fmt(now - keep_ms))
  for _, h in ipairs(old) do redis.call('HDEL', ended, h) end
  if #old > 0 then redis.call('ZREMRANGEBYSCORE', endat, '-inf', fmt(now - keep_ms)) end
end

-- want: five numbers, -1 = no limit asked. parties: the reservations being made together
-- (this one included); each limited field grants at most ceil(remaining / parties), so
-- reservations made one after another with parties n, n-1, ..., 1 split what is left
-- and never pass it. Returns {status, g1..g5}; status 1 = granted, 2 = the holder already
-- had this reservation (same grant), -1 = ledger missing, -2 = holder already ended.
local function reserve(b, holds, exp, ended, endat, holder, ttl, keep_ms, want, trace,
                       parties)
  local now = now_ms()
  reclaim(b, holds, exp, ended, endat, now, keep_ms)
  if redis.call('EXISTS', b) == 0 then return {-1} end
  local enc = redis.call('HGET', holds, holder)
  if enc then
    redis.call('ZADD', exp, fmt(now + ttl), holder)
    local g = split(enc)
    return {2, g[1], g[2], g[3], g[4], g[5]}
  end
  if redis.call('HEXISTS', ended, holder) == 1 then return {-2} end
  local out = {1}
  local parts = {}
  for i, f in ipairs(FIELDS) do
    local g = -1
    if redis.call('HEXISTS', b, 'limit:' .. f) == 1 then
      local rem = tonumber(redis.call('HGET', b, 'remaining:' .. f))
      if rem < 0 then rem = 0 end
      g = rem
      if parties > 1 then g = math.ceil(rem / parties) end
      if want[i] >= 0 and want[i] < rem then g = want[i] end
      redis.call('HINCRBY', b, 'remaining:' .. f, fmt(-g))
      redis.call('HINCRBY', b, 'reserved:' .. f, fmt(g))
    end
    out[#out + 1] = g
    parts[#parts + 1] = fmt(g)
  end
  redis.call('HSET', holds, holder, with_trace(table.concat(parts, ','), trace))
  redis.call('ZADD', exp, fmt(now + ttl), holder)
  return out
end

-- used: five numbers >= 0. Returns 1 settled, 2 settled late (the grant had already
-- returned on expiry: only the usage is counted), 0 already settled, -1 unknown holder.
local function settle(b, holds, exp, ended, endat, holder, keep_ms, used)
  local now = now_ms()
  local enc = redis.call('HGET', holds, holder)
  local state = redis.call('HGET', ended, holder)
  if not enc and state == 's' then return 0 end
  if not enc and state ~= 'e' then return -1 end
  local g = {-1, -1, -1, -1, -1}
  if enc then g = split(enc) end
  for i, f in ipairs(FIELDS) do
    redis.call('HINCRBY', b, 'used:' .. f, fmt(used[i]))
    if redis.call('HEXISTS', b, 'limit:' .. f) == 1 then
      if enc then
        redis.call('HINCRBY', b, 'reserved:' .. f, fmt(-g[i]))
        redis.call('HINCRBY', b, 'remaining:' .. f, fmt(g[i] - used[i]))
      else
        redis.call('HINCRBY', b, 'remaining:' .. f, fmt(-used[i]))
      end
    end
  end
  redis.call('HDEL', holds, holder)
  redis.call('ZREM', exp, holder)
  redis.call('HSET', ended, holder, 's')
  redis.call('ZADD', endat, fmt(now), holder)
  if enc then return 1 end
  return 2
end

local function nums(from, count)
  local out = {}
  for i = 0, count - 1 do out[#out + 1] = tonumber(ARGV[from + i]) end
  return out
end
"""

# KEYS: lease, fence. ARGV: holder, ttl_ms, traceparent. Returns {1, token} or
# {0, pttl_ms}.
ACQUIRE = (
    _PRELUDE
    + r"""
local token, pttl = acquire(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
if token then return {1, token} end
return {0, pttl}
"""
)

# KEYS: lease. ARGV: "token:holder", ttl_ms. Returns 1 renewed, 0 gone, -1 taken over.
RENEW_LEASE = r"""
local cur = redis.call('GET', KEYS[1])
if cur then cur = string.match(cur, '^[^\n]*') end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur then return -1 end
return 0
"""

# KEYS: lease. ARGV: "token:holder". Returns 1 released, 0 not held by this holder.
RELEASE = _PRELUDE + "\nreturn release(KEYS[1], ARGV[1])\n"

# KEYS: budget, limits... ARGV: five limits (-1 = unlimited). Creates the ledger when it
# is missing; returns {1} created, {0} matches, or {-1, l1..l5} the stored limits.
INIT_BUDGET = (
    _PRELUDE
    + r"""
local want = nums(1, 5)
if redis.call('EXISTS', KEYS[1]) == 0 then
  for i, f in ipairs(FIELDS) do
    if want[i] >= 0 then
      redis.call('HSET', KEYS[1], 'limit:' .. f, fmt(want[i]), 'remaining:' .. f,
        fmt(want[i]), 'reserved:' .. f, '0')
    end
    redis.call('HSET', KEYS[1], 'used:' .. f, '0')
  end
  return {1}
end
local stored = {-1}
local same = true
for i, f in ipairs(FIELDS) do
  local l = redis.call('HGET', KEYS[1], 'limit:' .. f)
  local n = -1
  if l then n = tonumber(l) end
  stored[#stored + 1] = n
  if n ~= want[i] then same = false end
end
if same then return {0} end
return stored
"""
)

# KEYS: budget, holds, exp, ended, endat. ARGV: keep_ms, action ('reset' or 'delete').
# Returns {1} done, {0} no such budget, {-1, holders} refused: reservations are held.
# Ended holder ids are kept on reset, so a late settle is still recognised as late.
RESET_BUDGET = (
    _PRELUDE
    + r"""
reclaim(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], now_ms(), tonumber(ARGV[1]))
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local holders = redis.call('HLEN', KEYS[2])
if holders > 0 then return {-1, holders} end
if ARGV[2] == 'delete' then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
  return {1}
end
for _, f in ipairs(FIELDS) do
  local l = redis.call('HGET', KEYS[1], 'limit:' .. f)
  if l then
    redis.call('HSET', KEYS[1], 'remaining:' .. f, l, 'reserved:' .. f, '0')
  end
  redis.call('HSET', KEYS[1], 'used:' .. f, '0')
end
return {1}
"""
)

# KEYS: budget, holds, exp, ended, endat. ARGV: holder, ttl_ms, keep_ms, want x5,
# traceparent, parties.
RESERVE = (
    _PRELUDE
    + r"""
return reserve(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], tonumber(ARGV[2]),
  tonumber(ARGV[3]), nums(4, 5), ARGV[9], tonumber(ARGV[10]))
"""
)

# KEYS: budget, holds, exp, ended, endat. ARGV: holder, keep_ms, used x5.
SETTLE = (
    _PRELUDE
    + r"""
return settle(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], tonumber(ARGV[2]),
  nums(3, 5))
"""
)

# KEYS: holds, exp. ARGV: holder, ttl_ms. Returns 1 renewed, 0 the reservation is gone.
RENEW_RESERVATION = (
    _PRELUDE
    + r"""
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], fmt(now_ms() + tonumber(ARGV[2])), ARGV[1])
return 1
"""
)

# KEYS: budget, holds, exp, ended, endat. ARGV: keep_ms. Reclaims expired reservations,
# then returns {exists, holders, limit/remaining/reserved/used per field (-1 = unlimited),
# then holder, traceparent for each reservation that recorded one}.
STATE = (
    _PRELUDE
    + r"""
reclaim(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], now_ms(), tonumber(ARGV[1]))
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local out = {1, redis.call('HLEN', KEYS[2])}
for _, f in ipairs(FIELDS) do
  for _, part in ipairs({'limit:', 'remaining:', 'reserved:', 'used:'}) do
    local v = redis.call('HGET', KEYS[1], part .. f)
    if v then out[#out + 1] = tonumber(v) else out[#out + 1] = -1 end
  end
end
local held = redis.call('HGETALL', KEYS[2])
for i = 1, #held, 2 do
  local trace = string.match(held[i + 1], '\n(.*)$')
  if trace then
    out[#out + 1] = held[i]
    out[#out + 1] = trace
  end
end
return out
"""
)

# KEYS: lease, fence, budget, holds, exp, ended, endat.
# ARGV: holder, lease_ttl_ms, reserve_ttl_ms, keep_ms, want x5, traceparent, parties.
# Returns {1, token, status, g1..g5}, or {0, pttl_ms} when the lease is busy (nothing is
# reserved then), or {1, token, status} with a negative reserve status (the lease taken in
# this step is released again, so a refused reservation leaves no lease behind).
ACQUIRE_AND_RESERVE = (
    _PRELUDE
    + r"""
local holder = ARGV[1]
local token, pttl = acquire(KEYS[1], KEYS[2], holder, ARGV[2], ARGV[10])
if not token then return {0, pttl} end
local r = reserve(KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], holder, tonumber(ARGV[3]),
  tonumber(ARGV[4]), nums(5, 5), ARGV[10], tonumber(ARGV[11]))
if r[1] < 0 then
  release(KEYS[1], fmt(token) .. ':' .. holder)
  return {1, token, r[1]}
end
return {1, token, r[1], r[2], r[3], r[4], r[5], r[6]}
"""
)

# KEYS: lease, holds, exp. ARGV: "token:holder", lease_ttl_ms, holder, reserve_ttl_ms.
# Returns {lease: 1 renewed, 0 gone, -1 taken over; reservation: 1 renewed, 0 gone}; a
# lost one is not renewed, and neither is the other then (the holder stops).
RENEW_BOTH = (
    _PRELUDE
    + r"""
local cur = redis.call('GET', KEYS[1])
if cur then cur = owner(cur) end
local lease = 0
if cur == ARGV[1] then lease = 1 elseif cur then lease = -1 end
local reservation = redis.call('HEXISTS', KEYS[2], ARGV[3])
if lease == 1 and reservation == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('ZADD', KEYS[3], fmt(now_ms() + tonumber(ARGV[4])), ARGV[3])
end
return {lease, reservation}
"""
)

# KEYS: lease, budget, holds, exp, ended, endat. ARGV: "token:holder", holder, keep_ms,
# used x5. Returns {released, settle status}.
RELEASE_AND_SETTLE = (
    _PRELUDE
    + r"""
local released = release(KEYS[1], ARGV[1])
local s = settle(KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[2], tonumber(ARGV[3]),
  nums(4, 5))
return {released, s}
"""
)
