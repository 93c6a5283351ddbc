-- KEYS: lease, fencing counter; ARGV: owner, ttl ms.
-- Takes a free lease under a new fencing token; returns the token, or 0 when held.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token .. ' ' .. ARGV[1], 'PX', ARGV[2])
return token
