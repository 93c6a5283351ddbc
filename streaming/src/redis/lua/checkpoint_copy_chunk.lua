-- Runs after lease_held.lua. Copies one chunk of a state hash into a checkpoint (its
-- owner, between two steps of the same part: nothing is committed meanwhile).
-- KEYS: lease, fencing counter, state hash, its copy
-- ARGV: lease value held, lease ttl ms, HSCAN cursor ('0' first: the copy is emptied),
--       fields per chunk, collection base ('' when the state keeps no per-key
--       collections; else each field's collection `base:k:field` is copied too), the
--       checkpoint's copy prefix
-- Returns the next cursor ('0' when the hash is copied), or 'fenced'.
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 'fenced' end
if ARGV[3] == '0' then redis.call('DEL', KEYS[4]) end
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
    local src = ARGV[5] .. ':k:' .. kv[k]
    local dst = ARGV[6] .. src
    if redis.call('COPY', src, dst, 'REPLACE') == 1 then
      redis.call('PERSIST', dst)
    else
      redis.call('DEL', dst)
    end
  end
end
return r[1]
