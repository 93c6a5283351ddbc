-- Prelude of the retry-scheduling scripts (not a script by itself).
-- schedule_retry(due zset, data hash, token, delay ms, from): stores the retry entry's
-- fields ARGV[from..] (MessagePack) under `token` and makes it due `delay` ms from now.
local function schedule_retry(due, data, token, delay, from)
  local fields = {}
  for i = from, #ARGV do fields[#fields + 1] = ARGV[i] end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', data, token, cmsgpack.pack(fields))
  redis.call('ZADD', due, now + tonumber(delay), token)
end
