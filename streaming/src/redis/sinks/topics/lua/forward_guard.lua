-- The first command of a fast forward's transaction (MULTI, this guard, one plain `XADD`
-- per record, forward_tail.lua, EXEC) into one target partition: the appends run outside
-- Lua, which costs Redis a fraction of a script's per-record work. Lets the appends go
-- ahead only when every record of the call is new to the partition: the mark of the
-- records' outbox is before the first record (and, for a call after the partition's
-- first of a read, has reached its predecessor's end). Otherwise the stream is moved
-- aside to key .. '\0stash' (the appends then write a scratch stream), the reason is
-- noted in the marker, and forward_tail.lua drops the scratch stream and puts the
-- stream back: the transaction changes nothing, and the forwarder sends the call's
-- records through topic_forward.lua, which appends only what is missing.
-- KEYS: target partition stream, forwarding marks hash, marker (all in one slot)
-- ARGV: mark field, the predecessor's end position ('' for none), the first record's
--       position ('{ms}-{seq}/{index}')
-- Returns 1 when the appends may go ahead, else the reason ('type' — a key holds another
-- type; 'mark' — a malformed mark or position; 'order'; 'forwarded').
-- Never raises: the appends run whatever it returns. Its first write is DEL, which Redis
-- never refuses for memory.

-- Prepended: positions.lua (less, parse, after).

redis.call('DEL', KEYS[3])
local stream = redis.call('TYPE', KEYS[1])['ok']
local marks = redis.call('TYPE', KEYS[2])['ok']
local why
if (stream ~= 'stream' and stream ~= 'none') or (marks ~= 'hash' and marks ~= 'none') then
  why = 'type'
else
  local mark = marks == 'hash' and redis.call('HGET', KEYS[2], ARGV[1])
  if mark and not parse(mark) then
    why = 'mark'
  elseif not parse(ARGV[3]) or (ARGV[2] ~= '' and not parse(ARGV[2])) then
    why = 'mark'
  elseif ARGV[2] ~= '' and (not mark or after(ARGV[2], mark)) then
    why = 'order'
  elseif mark and not after(ARGV[3], mark) then
    why = 'forwarded'
  end
end
if not why then return 1 end
local stash = KEYS[1] .. '\0stash'
redis.call('DEL', stash)
if stream ~= 'none' then redis.call('RENAME', KEYS[1], stash) end
redis.call('SET', KEYS[3], why, 'PX', 10000)
return why
