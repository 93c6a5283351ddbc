-- Runs after mq's lease_held.lua.
-- KEYS: state index, schema hash, lease, fencing counter
-- ARGV: lease value held, lease ttl ms, n prefixes, prefix..., field, fingerprint, ...
-- Deletes the index's hashes named `prefix` or `prefix:s<i>`, with the keys' collections
-- `prefix:k:<field>` of a collection state (the hash's fields name them), and writes the
-- fingerprints, if the partition's lease is still ours.
if not lease_held(KEYS[3], KEYS[4], ARGV[1], ARGV[2]) then return 'fenced' end
local n = tonumber(ARGV[3])
if n > 0 then
  for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do
    for j = 4, n + 3 do
      local p = ARGV[j]
      if k == p or (string.sub(k, 1, #p + 2) == p .. ':s' and string.match(string.sub(k, #p + 3), '^%d+$')) then
        for _, f in ipairs(redis.call('HKEYS', k)) do
          redis.call('DEL', p .. ':k:' .. f)
        end
        redis.call('DEL', k)
        redis.call('SREM', KEYS[1], k)
      end
    end
  end
end
local args = {}
for j = n + 4, #ARGV do args[#args + 1] = ARGV[j] end
if #args > 0 then redis.call('HSET', KEYS[2], unpack(args)) end
return 0
