-- Prelude of every acknowledging script (not a script by itself).
-- id_gt(a, b): stream id comparison.
-- advance(stream, acked set, frontier key, newly): moves the commit frontier over the ids
-- in `newly` (a table keyed by the ids the calling script just acknowledged) and those
-- parked in the acked set, stores it and returns it.
local function id_parts(id)
  local dash = string.find(id, '-', 1, true)
  if not dash then return tonumber(id), 0 end
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end
local function id_gt(a, b)
  local am, as = id_parts(a)
  local bm, bs = id_parts(b)
  if am ~= bm then return am > bm end
  return as > bs
end
local function advance(stream, acked, frontier, newly)
  local f = redis.call('GET', frontier)
  if not f then f = '0-0' end
  -- An id may be both newly acknowledged and parked (a failed record is acknowledged
  -- with its retry or dead letter, then again by its batch): the frontier passing it
  -- removes it from the set, which holds only ids above the frontier.
  local parked = redis.call('SCARD', acked) > 0
  local stop = false
  while not stop do
    local entries = redis.call('XRANGE', stream, '(' .. f, '+', 'COUNT', 256)
    if #entries == 0 then break end
    for _, e in ipairs(entries) do
      local id = e[1]
      if newly[id] then
        newly[id] = nil
        f = id
        if parked then redis.call('SREM', acked, id) end
      elseif redis.call('SREM', acked, id) == 1 then
        f = id
      else
        stop = true
        break
      end
    end
  end
  redis.call('SET', frontier, f)
  for id, _ in pairs(newly) do
    if id_gt(id, f) then redis.call('SADD', acked, id) end
  end
  return f
end
