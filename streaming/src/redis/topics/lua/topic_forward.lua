-- Forwards one outbox record into a partition of the target topic at most once: appends
-- the message unless the forwarding mark of its outbox stream already reached the
-- record's outbox entry id, then moves the mark to that id, atomically. Both keys carry
-- the target partition's hash tag, so the script runs in one slot.
-- KEYS: target partition stream, forwarding marks hash (outbox stream -> last entry id)
-- ARGV: mark field, outbox entry id ('{ms}-{seq}'), max length ('' for none), then the
--       message's field/value pairs
-- Returns 1 when the message was appended, 0 when the mark had it already (nothing
-- written).

-- Whether decimal string a < b as numbers (no leading zeros; exact beyond 2^53).
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

-- Whether stream id a is after stream id b: milliseconds first, then sequence.
local function after(a, b)
  local ams, aseq = string.match(a, '^(%d+)-(%d+)$')
  local bms, bseq = string.match(b, '^(%d+)-(%d+)$')
  if not ams or not bms then
    return redis.error_reply('ERR forwarding: malformed stream id `' .. a .. '` or `' .. b .. '`')
  end
  if ams ~= bms then return less(bms, ams) end
  return less(bseq, aseq)
end

if not string.match(ARGV[2], '^%d+-%d+$') then
  return redis.error_reply('ERR forwarding: malformed outbox entry id `' .. ARGV[2] .. '`')
end
local mark = redis.call('HGET', KEYS[2], ARGV[1])
if mark then
  local newer = after(ARGV[2], mark)
  if type(newer) == 'table' then return newer end
  if not newer then return 0 end
end
local args = {KEYS[1]}
if ARGV[3] ~= '' then
  args[#args + 1] = 'MAXLEN'
  args[#args + 1] = '~'
  args[#args + 1] = ARGV[3]
end
args[#args + 1] = '*'
for i = 4, #ARGV do args[#args + 1] = ARGV[i] end
redis.call('XADD', unpack(args))
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
