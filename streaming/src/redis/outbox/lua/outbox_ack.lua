-- Settles a delivered outbox entry (its last record delivered): acknowledge it for the
-- dispatcher's group, delete it from the outbox stream (the trim) and drop its progress,
-- atomically.
-- KEYS: outbox stream, attempts hash (entry id -> failed attempts, entry id:next -> index)
-- ARGV: group, entry id, its progress field ('{entry id}:next')
-- Returns XACK's count (0: the entry was no longer pending; it is deleted all the same).
local n = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2], ARGV[3])
return n
