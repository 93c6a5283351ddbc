-- Runs after lease_held.lua. Opens checkpoint ARGV[3]: its record, its place among the
-- job's checkpoints and among the open ones (which every partition owner polls).
-- KEYS: leader lease, leader token counter, meta, ids, open
-- ARGV: leader lease value ('' without leader election: not checked), lease ttl ms, id,
--       now ms, deadline ms, then field/value pairs of the record
-- Returns 1, or 'fenced' (the lease is another process's: nothing written). Open
-- checkpoints whose deadline passed (their coordinator died) are dropped from the open set.
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 'fenced' end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. ARGV[4])
redis.call('HSET', KEYS[3], 'status', 'pending', unpack(ARGV, 6))
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[3])
redis.call('ZADD', KEYS[5], ARGV[5], ARGV[3])
return 1
