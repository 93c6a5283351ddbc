-- Runs after lease_held.lua. Restore, second phase: copies one chunk of a checkpoint's
-- copy of a state hash back (and the chunk's per-key collections when the part recorded
-- a collection base for it), with the state TTL when one is configured.
-- KEYS: lease, fencing counter, the copy, the state hash
-- ARGV: lease value held, lease ttl ms, HSCAN cursor, fields per chunk, collection base
--       ('' none), the checkpoint's copy prefix, state ttl ms ('' none)
-- Returns the next cursor ('0': copied), or 'fenced'.
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 'fenced' end
local r = redis.call('HSCAN', KEYS[3], ARGV[3], 'COUNT', ARGV[4])
local kv = r[2]
local i = 1
while i <= #kv do
  local j = math.min(i + 999, #kv)
  redis.call('HSET', KEYS[4], unpack(kv, i, j))
  i = j + 1
end
if ARGV[5] ~= '' then
  for k = 1, #kv, 2 do
    local dst = ARGV[5] .. ':k:' .. kv[k]
    if redis.call('COPY', ARGV[6] .. dst, dst, 'REPLACE') == 1 and ARGV[7] ~= '' then
      redis.call('PEXPIRE', dst, ARGV[7])
    end
  end
end
if ARGV[7] ~= '' and #kv > 0 then redis.call('PEXPIRE', KEYS[4], ARGV[7]) end
return r[1]
