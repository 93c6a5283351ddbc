-- Runs after lease_held.lua. The last step of a partition's part of a checkpoint: writes
-- the part record once every state hash is copied.
-- KEYS: lease, fencing counter, part record
-- ARGV: lease value held, lease ttl ms, then field/value pairs of the record
-- Returns 1, or 'fenced'.
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 'fenced' end
redis.call('HSET', KEYS[3], unpack(ARGV, 3))
return 1
