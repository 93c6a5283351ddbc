-- Runs after lease_held.lua.
-- KEYS: stream, lease, fencing counter; ARGV: lease value held, lease ttl ms, group, consumer
-- A take's clean-up: deletes the group's consumers on this partition other than `consumer`
-- that have nothing pending (earlier owners of the partition: a restarted or crashed
-- process, a subtask moved elsewhere; a take in XACK mode has claimed their entries), if
-- the lease is still ours, so the group's consumer list does not grow with every run.
-- Returns how many were deleted.
if not lease_held(KEYS[2], KEYS[3], ARGV[1], ARGV[2]) then return 'fenced' end
local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[3])
if not ok then return 0 end
local deleted = 0
for _, c in ipairs(consumers) do
  local name, pending
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1] elseif c[i] == 'pending' then pending = c[i + 1] end
  end
  if name and name ~= ARGV[4] and pending == 0 then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[3], name)
    deleted = deleted + 1
  end
end
return deleted
