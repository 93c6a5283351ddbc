-- Runs after lease_held.lua.
-- KEYS: stream, lease, fencing counter; ARGV: lease value held, lease ttl ms, group, id
-- Points the group at `id` (creating it there if missing), if the lease is still ours.
if not lease_held(KEYS[2], KEYS[3], ARGV[1], ARGV[2]) then return 'fenced' end
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[3], ARGV[4], 'MKSTREAM')
if type(created) == 'table' and created.err then
  if not string.find(created.err, 'BUSYGROUP') then return redis.error_reply(created.err) end
  redis.call('XGROUP', 'SETID', KEYS[1], ARGV[3], ARGV[4])
end
return 1
