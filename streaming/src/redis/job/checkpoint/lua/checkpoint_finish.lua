-- Runs after lease_held.lua. Completes checkpoint ARGV[3] when every part is written,
-- else marks it failed; either way it leaves the open set.
-- KEYS: leader lease, leader token counter, meta, parts, open, complete
-- ARGV: leader lease value ('' without leader election), lease ttl ms, id, parts
--       expected, now ms, failure ('' to complete)
-- Returns 'complete', 'failed', 'gone' (not pending any more) or 'fenced' (the lease is
-- another process's: nothing written, and the checkpoint never completes).
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 'fenced' end
redis.call('ZREM', KEYS[5], ARGV[3])
if redis.call('HGET', KEYS[3], 'status') ~= 'pending' then return 'gone' end
if ARGV[6] == '' and redis.call('HLEN', KEYS[4]) >= tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[3], 'status', 'complete', 'finished_at_ms', ARGV[5])
  redis.call('ZADD', KEYS[6], ARGV[3], ARGV[3])
  return 'complete'
end
local why = ARGV[6]
if why == '' then why = 'parts missing' end
redis.call('HSET', KEYS[3], 'status', 'failed', 'finished_at_ms', ARGV[5], 'failure', why)
return 'failed'
