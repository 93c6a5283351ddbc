-- Keeps outbox entries this dispatcher is delivering its own: when the head entry is
-- still pending for this consumer, resets its idle time (XCLAIM with min-idle 0, JUSTID:
-- the delivery count stays), and that of each other given entry still pending for this
-- consumer (the ones queued behind it), so another dispatcher does not claim them while
-- they wait; with a next index, notes that the head's delivery goes on at that record (its
-- failure count starts again).
-- KEYS: outbox stream, attempts hash (entry id -> failed attempts, entry id:next -> index)
-- ARGV: group, consumer, head entry id, next record index ('' to only keep the entries),
--       then the ids of the entries queued behind the head
-- Returns 1, or 0 when the head is not pending for this consumer any more (another
-- dispatcher claimed it, or it was settled): nothing is written then.
local function ours(id)
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
  return #p > 0 and p[1][2] == ARGV[2]
end
if not ours(ARGV[3]) then return 0 end
local keep = {ARGV[3]}
for i = 5, #ARGV do
  if ours(ARGV[i]) then keep[#keep + 1] = ARGV[i] end
end
keep[#keep + 1] = 'JUSTID'
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(keep))
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[3] .. ':next', ARGV[4])
  redis.call('HDEL', KEYS[2], ARGV[3])
end
return 1
