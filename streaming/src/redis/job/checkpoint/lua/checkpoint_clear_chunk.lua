-- Runs after lease_held.lua. Restore, first phase: deletes one chunk of a partition's
-- current state hash — the chunk's per-key collections (`base:k:field`, whether or not
-- the state keeps any: a missing key costs nothing) — and the hash after its last chunk.
-- KEYS: lease, fencing counter, state hash
-- ARGV: lease value held, lease ttl ms, HSCAN cursor, fields per chunk, collection base
-- Returns the next cursor ('0': deleted), or 'fenced'.
if not lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 'fenced' end
local r = redis.call('HSCAN', KEYS[3], ARGV[3], 'COUNT', ARGV[4])
local kv = r[2]
for k = 1, #kv, 2 do redis.call('UNLINK', ARGV[5] .. ':k:' .. kv[k]) end
if r[1] == '0' then redis.call('UNLINK', KEYS[3]) end
return r[1]
