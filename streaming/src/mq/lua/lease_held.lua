-- Prelude of every script that writes for a partition owner (not a script by itself).
-- lease_held(lease, fence, value, ttl): true when the lease key holds `value` (extended by
-- `ttl` ms) or expired and nobody took it since (the fencing counter still holds our
-- token: taken back under it); false when another owner took it. An empty `value` is a
-- caller that holds no lease (never fenced).
local function lease_held(lease, fence, value, ttl)
  if value == '' then return true end
  local held = redis.call('GET', lease)
  if held == value then
    redis.call('PEXPIRE', lease, ttl)
    return true
  end
  if (not held) and redis.call('GET', fence) == string.match(value, '^(%d+) ') then
    redis.call('SET', lease, value, 'PX', ttl)
    return true
  end
  return false
end
