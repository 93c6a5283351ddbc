-- Prelude of the NOACK failure scripts (not a script by itself).
-- settle(settled, id): records that entry `id` was sent to retry or dead letter, in the
-- sorted set `settled` (id -> epoch ms); false when it was already (read again after a
-- crash before its batch's offset was committed). Entries older than 24 h are dropped:
-- the Redis engine clears the set with every commit, another caller of the NOACK reader
-- may not.
local function settle(settled, id)
  if redis.call('ZSCORE', settled, id) then return false end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', settled, '-inf', now - 86400000)
  redis.call('ZADD', settled, now, id)
  return true
end
