-- Tells the coordinator a partition's part of a checkpoint is written: its field in the
-- checkpoint's parts hash, only while the checkpoint exists (its record is there and not
-- being deleted), so that a late report never re-creates the parts hash of a checkpoint
-- retention deleted.
-- KEYS: the checkpoint's record, its parts hash (the job's hash tag)
-- ARGV: the partition's field, the offset of its part
-- Returns 1, or 0 (no such checkpoint any more: nothing written).
local status = redis.call('HGET', KEYS[1], 'status')
if (not status) or status == 'deleting' then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
