-- Keeps an outbox entry this dispatcher is delivering its own: when it is still pending
-- for this consumer, resets its idle time (XCLAIM with min-idle 0, JUSTID: the delivery
-- count stays), so another dispatcher does not claim it while its records are being
-- delivered, and — with a next index — notes that its delivery goes on at that record
-- (its failure count starts again).
-- KEYS: outbox stream, attempts hash (entry id -> failed attempts, entry id:next -> index)
-- ARGV: group, consumer, entry id, next record index ('' to only keep the entry)
-- Returns 1, or 0 when the entry is not pending for this consumer any more (another
-- dispatcher claimed it, or it was settled): nothing is written then.
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 or p[1][2] ~= ARGV[2] then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[3] .. ':next', ARGV[4])
  redis.call('HDEL', KEYS[2], ARGV[3])
end
return 1
