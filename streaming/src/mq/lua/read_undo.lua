-- The last command of a fenced read's transaction (see read_guard.lua): when the guard
-- found the lease taken by another owner, the read that followed it is undone — the
-- entries it delivered leave this consumer's pending list (XACK mode; NOACK has none) and
-- the group's last-delivered id goes back to where it was, so the next owner reads them.
-- KEYS: stream, undo key
-- ARGV: group, consumer, count
-- Returns 'fenced' after an undo, else 1.
local before = redis.call('GET', KEYS[2])
if not before then return 1 end
redis.call('DEL', KEYS[2])
local taken = redis.call('XPENDING', KEYS[1], ARGV[1], '(' .. before, '+', tonumber(ARGV[3]),
                         ARGV[2])
if #taken > 0 then
  local ids = {}
  for i, e in ipairs(taken) do ids[i] = e[1] end
  redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
end
redis.call('XGROUP', 'SETID', KEYS[1], ARGV[1], before)
return 'fenced'
