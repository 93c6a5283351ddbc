-- Forwards one outbox record into a partition of the target topic at most once: appends
-- the message unless the forwarding mark of its outbox stream already reached the
-- record's position in the outbox, then moves the mark to that position, atomically. Both
-- keys carry the target partition's hash tag, so the script runs in one slot.
-- KEYS: target partition stream, forwarding marks hash (outbox stream -> last position)
-- ARGV: mark field, the record's position '{ms}-{seq}/{index}' (its outbox entry id and
--       its index in the entry), max length ('' for none), then the message's
--       field/value pairs
-- Returns 1 when the message was appended, 0 when the mark had it already (nothing
-- written).

-- Whether decimal string a < b as numbers (no leading zeros; exact beyond 2^53).
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local function parse(p)
  return string.match(p, '^(%d+)-(%d+)/(%d+)$')
end

-- Whether position a is after position b: milliseconds, then sequence, then index.
local function after(a, b)
  local ams, aseq, ai = parse(a)
  local bms, bseq, bi = parse(b)
  if not bms then
    return redis.error_reply('ERR forwarding: malformed mark `' .. b .. '`')
  end
  if ams ~= bms then return less(bms, ams) end
  if aseq ~= bseq then return less(bseq, aseq) end
  return less(bi, ai)
end

if not parse(ARGV[2]) then
  return redis.error_reply('ERR forwarding: malformed outbox position `' .. ARGV[2] .. '`')
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
