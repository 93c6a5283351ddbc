-- Runs after lease_held.lua. The first command of a batch commit's transaction (MULTI,
-- this guard, the batch's state and sink writes as plain commands, commit_tail.lua,
-- EXEC). The writes run outside Lua because a script's arguments cost Redis several
-- times the writes (every argument is converted into a Lua string and back).
-- KEYS: lease, fencing counter, undo marker, written keys...
-- ARGV: lease value held, lease ttl ms, per written key the type it must have or have
--       none ('hash' | 'set' | 'list' | 'stream': the partition's stream when the
--       transaction XACKs: moved aside, the XACK finds no stream and changes nothing)
-- Returns 1 when the writes may go ahead (the lease is ours: extended or taken back, see
-- lease_held). Otherwise — another owner took the lease ('fenced'), or a written key
-- holds another type ('WRONGTYPE …') — every written key is moved aside to
-- key .. '\0stash' (no state or list name holds a NUL) before the writes, the reason is
-- noted in the undo marker, and commit_tail.lua puts the keys back: the transaction then
-- changes nothing.
-- The first command is a write that Redis never refuses for memory (DEL): under
-- `maxmemory`, a script is refused a write that may grow memory only while it has written
-- nothing yet, so every later write of the guard goes through.
redis.call('DEL', KEYS[3])
local why
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then
  why = 'fenced'
else
  for i = 4, #KEYS do
    local t = redis.call('TYPE', KEYS[i])['ok']
    if t ~= 'none' and t ~= ARGV[i - 1] then
      why = 'WRONGTYPE ' .. KEYS[i] .. ' holds a ' .. t .. ', the commit writes a ' .. ARGV[i - 1]
      break
    end
  end
end
if not why then return 1 end
for i = 4, #KEYS do
  local stash = KEYS[i] .. '\0stash'
  redis.call('DEL', stash)
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('RENAME', KEYS[i], stash) end
end
redis.call('SET', KEYS[3], why, 'PX', 10000)
return why
