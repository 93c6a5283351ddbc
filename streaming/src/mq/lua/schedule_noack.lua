-- Runs after lease_held.lua and schedule_retry.lua.
-- KEYS: due zset, data hash, lease, fencing counter, settled (see settle.lua)
-- ARGV: lease value held ('' = none), lease ttl ms, token (group + '\n' + id), delay ms,
--       field, value, ... (the fields include `rg` = group)
-- For NOACK readers: nothing to acknowledge; a token already scheduled (by this group) is
-- not scheduled twice.
if not lease_held(KEYS[3], KEYS[4], ARGV[1], ARGV[2]) then return 'fenced' end
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then return 0 end
if not settle(KEYS[5], string.match(ARGV[3], '([^\n]*)$')) then return 0 end
schedule_retry(KEYS[1], KEYS[2], ARGV[3], ARGV[4], 5)
return 1
