-- Runs after advance.lua.
-- KEYS: stream, acked set, frontier; ARGV: group, id...
local n = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
local newly = {}
for i = 2, #ARGV do newly[ARGV[i]] = true end
advance(KEYS[1], KEYS[2], KEYS[3], newly)
return n
