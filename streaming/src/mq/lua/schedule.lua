-- Runs after advance.lua, lease_held.lua and schedule_retry.lua.
-- KEYS: stream, acked, frontier, due zset, data hash, lease, fencing counter
-- ARGV: lease value held ('' = none), lease ttl ms, group, failed entry id,
--       token (group + '\n' + id), delay ms, field, value, ...
-- (the fields include `rg` = group)
if not lease_held(KEYS[6], KEYS[7], ARGV[1], ARGV[2]) then return 'fenced' end
if redis.call('XACK', KEYS[1], ARGV[3], ARGV[4]) == 0 then return 0 end
schedule_retry(KEYS[4], KEYS[5], ARGV[5], ARGV[6], 7)
local newly = {}
newly[ARGV[4]] = true
advance(KEYS[1], KEYS[2], KEYS[3], newly)
return 1
