-- Runs after lease_held.lua.
-- KEYS: lease, fencing counter; ARGV: held value "{token} {owner}", ttl ms, owner.
-- Moves a lease still held (or expired with nobody taking it since) to a new fencing
-- token: a write made under the old value that reaches Redis later is refused. Returns
-- the new token, or 0 when another owner took the lease.
if ARGV[1] ~= '' and lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then
  local token = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], token .. ' ' .. ARGV[3], 'PX', ARGV[2])
  return token
end
return 0
