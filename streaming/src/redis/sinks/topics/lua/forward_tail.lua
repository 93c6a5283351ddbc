-- The last command of a fast forward's transaction (see forward_guard.lua): drops the
-- scratch stream and puts the stream back when the guard refused, else moves the mark to
-- the last record appended.
-- KEYS: target partition stream, forwarding marks hash, marker
-- ARGV: mark field, the last record's position, the number of records
-- Returns the number of records appended, or the guard's reason.
-- Its first write is DEL, which Redis never refuses for memory.
local why = redis.call('GET', KEYS[3])
redis.call('DEL', KEYS[3])
if why then
  local stash = KEYS[1] .. '\0stash'
  redis.call('DEL', KEYS[1])
  if redis.call('EXISTS', stash) == 1 then redis.call('RENAME', stash, KEYS[1]) end
  return why
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return tonumber(ARGV[3])
