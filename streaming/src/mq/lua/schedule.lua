-- Runs after advance.lua and lease_held.lua.
-- KEYS: stream, acked, frontier, due zset, data hash, lease, fencing counter
-- ARGV: lease value held ('' = none), lease ttl ms, group, failed entry id,
--       token (group + '\n' + id), delay ms, field, value, ...
-- (the fields include `rg` = group)
if not lease_held(KEYS[6], KEYS[7], ARGV[1], ARGV[2]) then return 'fenced' end
if redis.call('XACK', KEYS[1], ARGV[3], ARGV[4]) == 0 then return 0 end
local fields = {}
for i = 7, #ARGV do fields[#fields + 1] = ARGV[i] end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[5], ARGV[5], cmsgpack.pack(fields))
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[6]), ARGV[5])
local newly = {}
newly[ARGV[4]] = true
advance(KEYS[1], KEYS[2], KEYS[3], newly)
return 1
