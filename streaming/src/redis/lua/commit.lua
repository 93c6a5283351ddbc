-- The batch commit: state writes, sink list appends and the acknowledgement, under the
-- lease check. Runs after mq's LUA_ADVANCE and LUA_LEASE_HELD (advance, id_gt, lease_held).
-- KEYS: stream, acked set, frontier (= committed offset in Offset mode), state index,
--       lease, fencing counter, state hashes..., sink lists...
-- ARGV: mode ('x' | 'o'), group, ttl ms (0 = none), lease value held "{token} {owner}",
--       lease ttl ms, n ids, ids..., read after (XACK: the group's last-delivered id
--       before the read of these ids, which are then every entry after it; '' = unknown),
--       n hashes, per hash: kind, replace (0 | 1), n set, item, ..., n del, field, ...,
--       sample (0 | 1),
--       n lists, per list: n, value, ...
-- A state hash's kind is 'i' (a state hash: HSET field, value / HDEL, listed in the state
-- index); a key's collection (not listed in the index) is 'h' (a map: HSET field, value /
-- HDEL), 's' (a set: SADD member / SREM) or 'l' (a list: RPUSH element); replace 1 deletes
-- the key first.
-- Returns per hash its size (HLEN, SCARD, LLEN) after the writes when sampled, else -1;
-- or the string
-- 'fenced' (and writes nothing) when another owner took the lease since. A lease that
-- expired during a long batch and that nobody took (the counter still holds our token) is
-- taken back; a held lease is extended: a commit renews the lease.
-- ARGV[from..to] without copying them into a table first.
local function chunked_argv(cmd, key, from, to)
  local i = from
  while i <= to do
    local j = math.min(i + 3999, to)
    redis.call(cmd, key, unpack(ARGV, i, j))
    i = j + 1
  end
end
if not lease_held(KEYS[5], KEYS[6], ARGV[4], ARGV[5]) then return 'fenced' end
local i = 6
local nids = tonumber(ARGV[i]); i = i + 1
local ids = {}
for j = 1, nids do ids[j] = ARGV[i]; i = i + 1 end
local read_after = ARGV[i]; i = i + 1
local ttl = tonumber(ARGV[3])
local nh = tonumber(ARGV[i]); i = i + 1
local sizes = {}
local SET = {i = 'HSET', h = 'HSET', s = 'SADD', l = 'RPUSH'}
local DEL = {i = 'HDEL', h = 'HDEL', s = 'SREM'}
local LEN = {i = 'HLEN', h = 'HLEN', s = 'SCARD', l = 'LLEN'}
for h = 1, nh do
  local key = KEYS[6 + h]
  local kind = ARGV[i]
  if ARGV[i + 1] == '1' then redis.call('DEL', key) end
  i = i + 2
  local width = 1
  if kind == 'i' or kind == 'h' then width = 2 end
  local nset = tonumber(ARGV[i]); i = i + 1
  if nset > 0 then
    chunked_argv(SET[kind], key, i, i + width * nset - 1)
    i = i + width * nset
  end
  local ndel = tonumber(ARGV[i]); i = i + 1
  if ndel > 0 then
    chunked_argv(DEL[kind], key, i, i + ndel - 1)
    i = i + ndel
  end
  if kind == 'i' then redis.call('SADD', KEYS[4], key) end
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
  if ARGV[i] == '1' then sizes[h] = redis.call(LEN[kind], key) else sizes[h] = -1 end
  i = i + 1
end
local nl = tonumber(ARGV[i]); i = i + 1
for l = 1, nl do
  local key = KEYS[6 + nh + l]
  local n = tonumber(ARGV[i]); i = i + 1
  if n > 0 then chunked_argv('RPUSH', key, i, i + n - 1) end
  i = i + n
end
if nids > 0 then
  if ARGV[1] == 'x' then
    local j = 1
    while j <= nids do
      local k = math.min(j + 3999, nids)
      redis.call('XACK', KEYS[1], ARGV[2], unpack(ids, j, k))
      j = k + 1
    end
    -- The ids are every entry after `read_after`: when the frontier is there and nothing
    -- is parked above it, it moves to the last id without walking the stream.
    if read_after ~= '' and redis.call('SCARD', KEYS[2]) == 0
        and redis.call('GET', KEYS[3]) == read_after then
      redis.call('SET', KEYS[3], ids[nids])
    else
      local newly = {}
      for k = 1, nids do newly[ids[k]] = true end
      advance(KEYS[1], KEYS[2], KEYS[3], newly)
    end
  else
    local cur = redis.call('GET', KEYS[3])
    if (not cur) or id_gt(ids[nids], cur) then redis.call('SET', KEYS[3], ids[nids]) end
  end
end
return sizes
