-- Runs after lease_held.lua.
-- KEYS: stream, lease, fencing counter
-- ARGV: lease value held ('' = none), lease ttl ms, group, consumer, min idle ms, cursor,
--       count
-- One XAUTOCLAIM step with JUSTID (delivery counts unchanged: the read that replays the
-- entries counts the delivery) moving entries pending for at least `min idle` ms to the
-- consumer, if the lease is still ours; returns XAUTOCLAIM's reply.
if not lease_held(KEYS[2], KEYS[3], ARGV[1], ARGV[2]) then return 'fenced' end
return redis.call('XAUTOCLAIM', KEYS[1], ARGV[3], ARGV[4], ARGV[5], ARGV[6],
                  'COUNT', ARGV[7], 'JUSTID')
