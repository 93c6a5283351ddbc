-- Runs after lease_held.lua. The first step of a partition's part of checkpoint ARGV[3]
-- (its owner, at a batch boundary: nothing uncommitted).
-- KEYS: lease, fencing counter, part record, state index, schema, commit frontier, acked
--       set, the checkpoint's copies of the last four (same hash tag), the stream, the
--       partition's checkpoint registry (hash id -> 'live' | ms it was deleted at)
-- ARGV: lease value held, lease ttl ms, the checkpoint's copy prefix (a key's copy is
--       named prefix .. key), group, checkpoint id
-- Returns 'fenced' (another owner holds the lease: nothing written), 'gone' (retention
-- deleted the checkpoint: nothing written), 'done' (the part record exists: an earlier
-- owner wrote the part), else the checkpoint registered 'live' and {offset, next, added, index
-- members...} (next: the id of the stream's first entry after the offset, '' when none;
-- added: the stream's entries-added counter, '' without a stream): the
-- copies of index, schema, frontier and acked set are made and an earlier owner's
-- unfinished copy is removed. The offset is the commit frontier, or when the partition
-- never committed the group's last-delivered id ('' when the group does not exist).
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 'fenced' end
local registered = redis.call('HGET', KEYS[13], ARGV[5])
if registered and registered ~= 'live' then return 'gone' end
if redis.call('EXISTS', KEYS[3]) == 1 then return 'done' end
redis.call('HSET', KEYS[13], ARGV[5], 'live')
for _, m in ipairs(redis.call('SMEMBERS', KEYS[8])) do redis.call('UNLINK', ARGV[3] .. m) end
redis.call('DEL', KEYS[8], KEYS[9], KEYS[10], KEYS[11])
redis.call('COPY', KEYS[4], KEYS[8])
redis.call('COPY', KEYS[5], KEYS[9])
redis.call('COPY', KEYS[7], KEYS[11])
redis.call('PERSIST', KEYS[8])
redis.call('PERSIST', KEYS[9])
local offset = redis.call('GET', KEYS[6])
if not offset then
  offset = ''
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[12])
  if ok then
    for _, g in ipairs(groups) do
      local name, last
      for i = 1, #g, 2 do
        if g[i] == 'name' then name = g[i + 1] end
        if g[i] == 'last-delivered-id' then last = g[i + 1] end
      end
      if name == ARGV[4] then offset = last end
    end
  end
end
redis.call('SET', KEYS[10], offset)
local next, added = '', ''
if redis.call('EXISTS', KEYS[12]) == 1 then
  local after = redis.call('XRANGE', KEYS[12], '(' .. (offset == '' and '0-0' or offset), '+', 'COUNT', 1)
  if #after > 0 then next = after[1][1] end
  local info = redis.call('XINFO', 'STREAM', KEYS[12])
  for i = 1, #info, 2 do
    if info[i] == 'entries-added' then added = tostring(info[i + 1]) end
  end
end
local out = {offset, next, added}
for _, m in ipairs(redis.call('SMEMBERS', KEYS[4])) do out[#out + 1] = m end
return out
