-- Runs after lease_held.lua. Copies one chunk of a state hash between the partition's
-- state and a checkpoint, either way (the owner writing a part: state -> copy; a restore:
-- copy -> state), with each copied field's per-key collection when the state keeps them.
-- KEYS: lease, fencing counter, source hash, destination hash, and for an owner writing
--       a part the partition's checkpoint registry (hash id -> 'live' | ms deleted at)
-- ARGV: lease value held, lease ttl ms, HSCAN cursor ('0' first: the destination is
--       emptied), fields per chunk, collection base ('' when the state keeps no per-key
--       collections; a field's collection is `base:k:field`), the collections' source
--       prefix and destination prefix (one of them the checkpoint's copy prefix, the other
--       ''), ttl ms of what is written ('' none: copies are persistent), and with the
--       registry the checkpoint id
-- Returns the next cursor ('0' when the hash is copied), 'fenced', or 'gone' (with the
-- registry: the checkpoint is not registered 'live' there any more, retention deleted
-- it; nothing written). A collection missing at the source is deleted at the destination.
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 'fenced' end
if KEYS[5] and redis.call('HGET', KEYS[5], ARGV[9]) ~= 'live' then return 'gone' end
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
    local coll = ARGV[5] .. ':k:' .. kv[k]
    local dst = ARGV[7] .. coll
    if redis.call('COPY', ARGV[6] .. coll, dst, 'REPLACE') == 1 then
      if ARGV[8] ~= '' then redis.call('PEXPIRE', dst, ARGV[8]) else redis.call('PERSIST', dst) end
    else
      redis.call('DEL', dst)
    end
  end
end
if ARGV[8] ~= '' and #kv > 0 then redis.call('PEXPIRE', KEYS[4], ARGV[8]) end
return r[1]
