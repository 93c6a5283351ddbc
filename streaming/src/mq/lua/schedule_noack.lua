-- Runs after lease_held.lua.
-- KEYS: due zset, data hash, lease, fencing counter
-- ARGV: lease value held ('' = none), lease ttl ms, token (group + '\n' + id), delay ms,
--       field, value, ... (the fields include `rg` = group)
-- For NOACK readers: nothing to acknowledge; a token already scheduled (by this group) is
-- not scheduled twice.
if not lease_held(KEYS[3], KEYS[4], ARGV[1], ARGV[2]) then return 'fenced' end
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then return 0 end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], ARGV[3], cmsgpack.pack(fields))
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[3])
return 1
