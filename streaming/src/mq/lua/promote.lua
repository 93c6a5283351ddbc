-- Runs after lease_held.lua.
-- KEYS: stream, due zset, data hash, lease, fencing counter
-- ARGV: lease value held ('' = none), lease ttl ms, limit, maxlen (0 = none)
-- Returns {retries moved, retries still scheduled}.
-- The stored fields carry `rg` (the group the retry is addressed to), so the new entry
-- does too.
if not lease_held(KEYS[4], KEYS[5], ARGV[1], ARGV[2]) then return 'fenced' end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tokens = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
for _, tok in ipairs(tokens) do
  local packed = redis.call('HGET', KEYS[3], tok)
  if packed then
    local fields = cmsgpack.unpack(packed)
    if tonumber(ARGV[4]) > 0 then
      redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '*', unpack(fields))
    else
      redis.call('XADD', KEYS[1], '*', unpack(fields))
    end
  end
  redis.call('HDEL', KEYS[3], tok)
  redis.call('ZREM', KEYS[2], tok)
end
return {#tokens, redis.call('ZCARD', KEYS[2])}
