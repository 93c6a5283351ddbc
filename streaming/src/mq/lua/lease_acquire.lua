-- KEYS: lease, fencing counter; ARGV: owner, ttl ms.
-- Takes the lease under a new fencing token when it is free, or when it already names
-- `owner`: an earlier acquisition or re-fencing of this owner whose reply was lost (a
-- Redis restart, a reset connection) left it there, and the new token fences whatever
-- that attempt might still write. Returns the token, or 0 when another owner holds it.
local held = redis.call('GET', KEYS[1])
if held and string.match(held, '^%d+ (.*)$') ~= ARGV[1] then return 0 end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token .. ' ' .. ARGV[1], 'PX', ARGV[2])
return token
