-- Runs after lease_held.lua. Restore, last phase: the index, schema and acked set back
-- from the checkpoint, the commit frontier at the checkpoint's offset, the settled set
-- emptied, and the consumer group moved (not destroyed) to the offset: its pending
-- entries are acknowledged (they are after the offset and are read again) and its
-- last-delivered id set to the offset, so the next owner reads every entry after it.
-- The positions of the pipeline's other inputs (kept in this partition) are set to the
-- part's, or deleted when the part has none.
-- KEYS: lease, fencing counter, index, schema, frontier, acked, settled, stream, the
--       checkpoint's copies of index, schema, frontier, acked, then the other inputs'
--       position keys
-- ARGV: lease value held, lease ttl ms, group, then each input's position ('' = none)
-- Returns 1, or 'fenced'.
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 'fenced' end
for i = 13, #KEYS do
  local position = ARGV[i - 9]
  if position == '' then redis.call('DEL', KEYS[i]) else redis.call('SET', KEYS[i], position) end
end
local function put_back(copy, key)
  redis.call('DEL', key)
  redis.call('COPY', copy, key)
end
put_back(KEYS[9], KEYS[3])
put_back(KEYS[10], KEYS[4])
put_back(KEYS[12], KEYS[6])
redis.call('DEL', KEYS[7])
local offset = redis.call('GET', KEYS[11]) or ''
if offset == '' then
  redis.call('DEL', KEYS[5])
  return 1
end
redis.call('SET', KEYS[5], offset)
if redis.call('EXISTS', KEYS[8]) == 0 then return 1 end
local ok = pcall(redis.call, 'XGROUP', 'SETID', KEYS[8], ARGV[3], offset)
if not ok then
  redis.call('XGROUP', 'CREATE', KEYS[8], ARGV[3], offset)
  return 1
end
while true do
  local pending = redis.call('XPENDING', KEYS[8], ARGV[3], '-', '+', 1000)
  if #pending == 0 then break end
  local ids = {}
  for _, e in ipairs(pending) do ids[#ids + 1] = e[1] end
  redis.call('XACK', KEYS[8], ARGV[3], unpack(ids))
end
return 1
