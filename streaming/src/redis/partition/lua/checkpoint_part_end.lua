-- Runs after lease_held.lua. The last step of a partition's part of a checkpoint: writes
-- the part record once every state hash is copied, while the checkpoint is registered
-- 'live' in the partition's registry (retention did not delete it).
-- KEYS: lease, fencing counter, part record, the partition's checkpoint registry
-- ARGV: lease value held, lease ttl ms, checkpoint id, then field/value pairs of the record
-- Returns 1, 0 (retention deleted the checkpoint: nothing written), or 'fenced'.
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 'fenced' end
if redis.call('HGET', KEYS[4], ARGV[3]) ~= 'live' then return 0 end
redis.call('HSET', KEYS[3], unpack(ARGV, 4))
return 1
