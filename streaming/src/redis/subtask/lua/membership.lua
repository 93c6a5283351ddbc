-- KEYS: the (topic, group)'s assignment hash.
-- ARGV: now (epoch ms), expiry (epoch ms), partition count, this subtask's consumer name,
--       on-time threshold (epoch ms: a member whose expiry is above it heartbeat within
--       the last two intervals), then names registered with it if absent (its siblings at
--       their first heartbeat).
-- Fields: `m:{name}` = a live subtask's heartbeat expiry; `p:{n}` = the owner of partition n.
--
-- Heartbeats this subtask, drops the expired ones, and keeps the assignment sticky and
-- balanced: each live subtask holds floor(P/N) or floor(P/N) + 1 partitions (the larger
-- quotas to those holding the most now, ties by name); a partition stays with a live
-- owner within its quota; a dead owner's partitions and those above a quota (the highest
-- numbers) go to the subtasks below their quota, in name order. So a change of the live
-- set moves only what it must: a leaver's partitions, or a joiner's share.
-- A member whose heartbeat is late (killed or frozen, not expired yet) keeps what it owns
-- but is given nothing new: the partitions go to the members on time (above their quota
-- if need be, to the one holding the fewest), so a partition is not dealt to a subtask
-- that died meanwhile and then dealt again when it expires.
-- Returns this subtask's partitions, ascending.
local key, now, partitions, me = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[3]), ARGV[4]
local on_time_after = tonumber(ARGV[5])
redis.call('HSET', key, 'm:' .. me, ARGV[2])
for i = 6, #ARGV do
  redis.call('HSETNX', key, 'm:' .. ARGV[i], ARGV[2])
end
local fields = redis.call('HGETALL', key)
local live, on_time, owner, count = {}, {}, {}, {}
for i = 1, #fields, 2 do
  local f, v = fields[i], fields[i + 1]
  local name = string.match(f, '^m:(.*)$')
  if name then
    if tonumber(v) > now then
      live[#live + 1] = name
      if tonumber(v) > on_time_after then on_time[name] = true end
      count[name] = 0
    else
      redis.call('HDEL', key, f)
    end
  end
end
table.sort(live)
for i = 1, #fields, 2 do
  local p = tonumber(string.match(fields[i], '^p:(%d+)$') or '')
  if p then
    if p < partitions and count[fields[i + 1]] then
      owner[p] = fields[i + 1]
      count[fields[i + 1]] = count[fields[i + 1]] + 1
    else
      redis.call('HDEL', key, fields[i])
    end
  end
end
local n = #live
local base, extra = math.floor(partitions / n), partitions % n
-- The larger quotas go to those holding the most (the least moves), ties by name.
local by_count = {}
for i, name in ipairs(live) do by_count[i] = name end
table.sort(by_count, function(a, b)
  if count[a] ~= count[b] then return count[a] > count[b] end
  return a < b
end)
local quota = {}
for i, name in ipairs(by_count) do
  quota[name] = base + ((i <= extra) and 1 or 0)
end
-- Above its quota: a subtask gives up its highest partitions.
for p = partitions - 1, 0, -1 do
  local o = owner[p]
  if o and count[o] > quota[o] then
    owner[p] = nil
    count[o] = count[o] - 1
  end
end
-- Unowned partitions, ascending, to the members on time below their quota, in name
-- order; when none is below it, to the one on time holding the fewest (ties by name).
local takers = {}
for _, name in ipairs(live) do
  if on_time[name] then takers[#takers + 1] = name end
end
if #takers == 0 then takers = live end
for p = 0, partitions - 1 do
  if not owner[p] then
    local o
    for _, name in ipairs(takers) do
      if count[name] < quota[name] then o = name break end
    end
    if not o then
      for _, name in ipairs(takers) do
        if not o or count[name] < count[o] then o = name end
      end
    end
    owner[p] = o
    count[o] = count[o] + 1
    redis.call('HSET', key, 'p:' .. p, o)
  end
end
local mine = {}
for p = 0, partitions - 1 do
  if owner[p] == me then mine[#mine + 1] = p end
end
return mine
