-- Runs after advance.lua. The last command of a batch commit's transaction (see
-- commit_guard.lua): undoes the writes when the guard refused them, else acknowledges
-- the batch's ids and returns the sizes asked for.
-- KEYS: stream, acked set, frontier (= committed offset in Offset mode), undo marker,
--       settled (Offset mode: the batch's entries sent to retry or dead letter, cleared
--       once the offset passes them), written keys... (in the guard's order)
-- ARGV: mode ('x': XACK the ids here | 'a': the transaction XACKed them before this
--       script, only the last id is passed | 'o': Offset), group, n ids, ids..., read
--       after (XACK: the group's last-delivered id before the read of these ids, which
--       are then every entry after it; '' = unknown, never with 'a'), per written key its
--       type when its size is asked ('hash' | 'set' | 'list'), else ''

-- Returns per written key its size after the writes, -1 when not asked; or the guard's
-- reason ('fenced', 'WRONGTYPE …') after putting every written key back as it was.
-- The first write is DEL, which Redis never refuses for memory: under `maxmemory` a
-- script is refused a write that may grow memory only while it has written nothing yet,
-- so the frontier's SET always follows the batch's writes.
local why = redis.call('GET', KEYS[4])
redis.call('DEL', KEYS[4])
if why then
  for i = 6, #KEYS do
    local stash = KEYS[i] .. '\0stash'
    redis.call('DEL', KEYS[i])
    if redis.call('EXISTS', stash) == 1 then redis.call('RENAME', stash, KEYS[i]) end
  end
  return why
end
local nids = tonumber(ARGV[3])
local i = 4 + nids
local read_after = ARGV[i]
i = i + 1
if nids > 0 then
  local last = ARGV[3 + nids]
  if ARGV[1] == 'a' then
    if redis.call('SCARD', KEYS[2]) == 0 and redis.call('GET', KEYS[3]) == read_after then
      redis.call('SET', KEYS[3], last)
    else
      local newly = {}
      for _, e in ipairs(redis.call('XRANGE', KEYS[1], '(' .. read_after, last)) do
        newly[e[1]] = true
      end
      advance(KEYS[1], KEYS[2], KEYS[3], newly)
    end
  elseif ARGV[1] == 'x' then
    local j = 4
    while j <= 3 + nids do
      local k = math.min(j + 3999, 3 + nids)
      redis.call('XACK', KEYS[1], ARGV[2], unpack(ARGV, j, k))
      j = k + 1
    end
    -- The ids are every entry after `read_after`: when the frontier is there and nothing
    -- is parked above it, it moves to the last id without walking the stream.
    if read_after ~= '' and redis.call('SCARD', KEYS[2]) == 0
        and redis.call('GET', KEYS[3]) == read_after then
      redis.call('SET', KEYS[3], last)
    else
      local newly = {}
      for k = 4, 3 + nids do newly[ARGV[k]] = true end
      advance(KEYS[1], KEYS[2], KEYS[3], newly)
    end
  else
    local cur = redis.call('GET', KEYS[3])
    if (not cur) or id_gt(last, cur) then redis.call('SET', KEYS[3], last) end
  end
end
-- The settled entries are the batch's: a commit without input (timers, idle flush) keeps
-- them, as the offset has not passed them.
if ARGV[1] == 'o' and nids > 0 then redis.call('DEL', KEYS[5]) end
local size_of = {hash = 'HLEN', set = 'SCARD', list = 'LLEN'}
local sizes = {}
for k = 6, #KEYS do
  local size = size_of[ARGV[i]]
  if size then sizes[k - 5] = redis.call(size, KEYS[k]) else sizes[k - 5] = -1 end
  i = i + 1
end
return sizes
