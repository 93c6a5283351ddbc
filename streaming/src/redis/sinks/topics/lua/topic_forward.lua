-- Forwards outbox records of one source partition into one partition of the target topic,
-- in order, each at most once: a record is appended unless the forwarding mark of its
-- outbox already reached the record's position in the outbox; after each append the mark
-- moves to that position. An error stops the script at that record (the ones after it
-- are not tried), so records reach the partition in outbox order. Both keys carry the
-- target partition's hash tag, so the script runs in one slot.
-- KEYS: target partition stream, forwarding marks hash (outbox -> last position)
-- ARGV: mark field, max length ('' for none), the position the mark must have reached
--       ('' for none: an earlier call of the same pipeline forwards the records up to
--       it; if that call failed, this one appends nothing and fails), then per record: its
--       position
--       '{ms}-{seq}/{index}' (its outbox entry id and its index in the entry), the number
--       of message field/value arguments that follow, and those arguments
-- Returns how many records were appended (the others the mark had already).

-- Prepended: positions.lua (less, parse, after).

local mark = redis.call('HGET', KEYS[2], ARGV[1])
if mark and not parse(mark) then
  return redis.error_reply('ERR forwarding: malformed mark `' .. mark .. '`')
end
if ARGV[3] ~= '' then
  if not parse(ARGV[3]) then
    return redis.error_reply('ERR forwarding: malformed position `' .. ARGV[3] .. '`')
  end
  if not mark or after(ARGV[3], mark) then
    return redis.error_reply('ERR forwarding: the records before `' .. ARGV[3] .. '` are not forwarded yet')
  end
end
local appended = 0
local i = 4
while i <= #ARGV do
  local position = ARGV[i]
  local n = tonumber(ARGV[i + 1])
  if not parse(position) or not n then
    return redis.error_reply('ERR forwarding: malformed outbox position `' .. position .. '`')
  end
  if not mark or after(position, mark) then
    local args = {KEYS[1]}
    if ARGV[2] ~= '' then
      args[#args + 1] = 'MAXLEN'
      args[#args + 1] = '~'
      args[#args + 1] = ARGV[2]
    end
    args[#args + 1] = '*'
    for j = i + 2, i + 1 + n do args[#args + 1] = ARGV[j] end
    redis.call('XADD', unpack(args))
    redis.call('HSET', KEYS[2], ARGV[1], position)
    mark = position
    appended = appended + 1
  end
  i = i + 2 + n
end
return appended
