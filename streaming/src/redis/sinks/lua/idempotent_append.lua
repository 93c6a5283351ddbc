-- Appends each value whose idempotency key this list has not seen within its TTL.
-- KEYS: list, dedup set (sorted set: idempotency key -> expiry ms; same hash slot)
-- ARGV: ttl ms, then idempotency key / value pairs
-- Returns how many values were appended. Expired keys are dropped first; a key repeated
-- within one call is appended once.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local n = 0
for i = 2, #ARGV, 2 do
  if not redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), ARGV[i])
    redis.call('RPUSH', KEYS[1], ARGV[i + 1])
    n = n + 1
  end
end
return n
