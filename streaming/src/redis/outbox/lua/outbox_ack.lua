-- Settles a delivered outbox entry: acknowledge it for the dispatcher's group, delete it
-- from the outbox stream (the trim) and drop its failed-attempt count, atomically.
-- KEYS: outbox stream, attempts hash (entry id -> failed attempts)
-- ARGV: group, entry id
-- Returns XACK's count (0: the entry was no longer pending; it is deleted all the same).
local n = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
return n
