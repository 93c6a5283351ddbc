-- Runs after lease_held.lua. Retention: ARGV[4] 'mark' sets checkpoint ARGV[3] to
-- 'deleting' (no longer complete: never restored from here on) before its parts are
-- deleted; 'drop' then deletes its record.
-- KEYS: leader lease, leader token counter, meta, parts, ids, complete, open
-- ARGV: leader lease value ('' without leader election), lease ttl ms, id, step
-- Returns 1, or 'fenced'.
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 'fenced' end
redis.call('ZREM', KEYS[6], ARGV[3])
redis.call('ZREM', KEYS[7], ARGV[3])
if ARGV[4] == 'mark' then
  if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('HSET', KEYS[3], 'status', 'deleting') end
else
  redis.call('DEL', KEYS[3], KEYS[4])
  redis.call('ZREM', KEYS[5], ARGV[3])
end
return 1
