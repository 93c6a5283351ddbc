-- Loads a partition's state: every hash its state index lists.
-- KEYS: the state index; returns key, {field, value, ...}, key, ...
local out = {}
for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  out[#out + 1] = k
  out[#out + 1] = redis.call('HGETALL', k)
end
return out
