-- Deletes one chunk of a checkpoint's copy of a state hash with per-key collections:
-- the chunk's collection copies, and the hash itself after the last chunk.
-- KEYS: the copy of the state hash
-- ARGV: HSCAN cursor, fields per chunk, the collections' copy base (copy prefix ..
--       collection base)
-- Returns the next cursor ('0': deleted).
local r = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local kv = r[2]
for k = 1, #kv, 2 do redis.call('UNLINK', ARGV[3] .. ':k:' .. kv[k]) end
if r[1] == '0' then redis.call('UNLINK', KEYS[1]) end
return r[1]
