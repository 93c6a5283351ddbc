-- Runs after lease_held.lua. The first command of a fenced read's transaction
-- (MULTI, this guard, XREADGROUP, read_undo.lua, EXEC): the read itself runs outside Lua,
-- because a script's reply of n stream entries costs Redis several times the read (every
-- entry is converted into Lua values and back).
-- KEYS: stream, lease, fencing counter, undo key
-- ARGV: lease value held, lease ttl ms, group, position wanted ('1' | '0')
-- Returns, while the lease is ours, the group's last-delivered id before the read when
-- asked ('' when not asked or the group is missing); otherwise notes that id in the undo key (read_undo.lua puts
-- the group back there) and returns 'fenced'.
local function last_delivered(stream, group)
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', stream)
  if not ok then return nil end
  for _, g in ipairs(groups) do
    for i = 1, #g, 2 do
      if g[i] == 'name' and g[i + 1] ~= group then break end
      if g[i] == 'last-delivered-id' then return g[i + 1] end
    end
  end
  return nil
end
-- The first command is a write that Redis never refuses for memory (DEL): under
-- `maxmemory`, a script is refused a write that may grow memory only while it has written
-- nothing yet, so the undo key's SET below always goes through.
redis.call('DEL', KEYS[4])
if lease_held(KEYS[2], KEYS[3], ARGV[1], ARGV[2]) then
  if ARGV[4] ~= '1' then return '' end
  return last_delivered(KEYS[1], ARGV[3]) or ''
end
local before = last_delivered(KEYS[1], ARGV[3])
if before then redis.call('SET', KEYS[4], before, 'PX', 10000) end
return 'fenced'
