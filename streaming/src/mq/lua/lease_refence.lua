-- Runs after lease_held.lua.
-- KEYS: lease, fencing counter; ARGV: held value "{token} {owner}", ttl ms, owner.
-- Moves a lease still held (or expired with nobody taking it since) to a new fencing
-- token: a write made under the old value that reaches Redis later is refused. A lease
-- naming `owner` under another token is also ours: a re-fencing whose reply was lost (a
-- Redis restart, a reset connection) moved it there. Returns the new token, or 0 when
-- another owner took the lease.
local function named_ours(lease, owner)
  local held = redis.call('GET', lease)
  return held and string.match(held, '^%d+ (.*)$') == owner
end
if ARGV[1] ~= '' and (lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) or named_ours(KEYS[1], ARGV[3])) then
  local token = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], token .. ' ' .. ARGV[3], 'PX', ARGV[2])
  return token
end
return 0
