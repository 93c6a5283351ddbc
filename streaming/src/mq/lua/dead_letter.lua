-- Runs after advance.lua and lease_held.lua.
-- KEYS: stream, acked, frontier, dlq, lease, fencing counter, settled (NOACK: entries sent
--       to retry or dead letter since the last offset commit, id → ms)
-- ARGV: lease value held ('' = none), lease ttl ms, ack ('1': acknowledge the entry for the
--       group and advance the frontier; '0': NOACK reader, nothing to acknowledge), group,
--       id, limit, n, the entry's field, value, ... (n values), dlq.* field, value, ...
-- More than `limit` entry values are packed into one `dlq.fields` value (MessagePack array),
-- so no `unpack` here grows with the entry (Lua's stack holds ~8000 values).
if not lease_held(KEYS[5], KEYS[6], ARGV[1], ARGV[2]) then return 'fenced' end
local ack = ARGV[3] == '1'
if ack and redis.call('XACK', KEYS[1], ARGV[4], ARGV[5]) == 0 then return 0 end
-- NOACK: nothing marks the entry as handled until its batch's offset is committed; an
-- entry read again after a crash in between is not dead-lettered twice.
if not ack and not settle(KEYS[7], ARGV[5]) then return 0 end
local limit, n = tonumber(ARGV[6]), tonumber(ARGV[7])
local args = {}
if n <= limit then
  for j = 8, 7 + n do args[#args + 1] = ARGV[j] end
else
  local packed = {}
  for j = 8, 7 + n do packed[#packed + 1] = ARGV[j] end
  args[1] = 'dlq.fields'
  args[2] = cmsgpack.pack(packed)
end
for j = 8 + n, #ARGV do args[#args + 1] = ARGV[j] end
redis.call('XADD', KEYS[4], '*', unpack(args))
if ack then
  local newly = {}
  newly[ARGV[5]] = true
  advance(KEYS[1], KEYS[2], KEYS[3], newly)
end
return 1
