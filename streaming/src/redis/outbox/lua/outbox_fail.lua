-- Counts a failed delivery of an outbox entry's current record and, on its last allowed
-- attempt (or for a permanent error), dead-letters that record: its fields plus `reason`,
-- `attempts`, `outbox_entry_id` and `dlq_ms` are appended to the dead-letter stream, and
-- the entry moves on to its next record — or, after its last, is acknowledged, deleted
-- from the outbox and its progress dropped — all in this one script.
-- KEYS: outbox stream, dead-letter stream, attempts hash (entry id -> failed attempts,
--       entry id:next -> index of the record being delivered)
-- ARGV: group, entry id, max attempts, reason, now (ms), permanent ('1' | '0'), the index
--       of the record after this one, whether this is the entry's last record ('1' | '0'),
--       the consumer, then the record's field/value pairs
-- Returns {state, attempts}: state -1 = the entry is not pending for this consumer
-- (settled, or claimed by another dispatcher: nothing written), -2 = the entry's
-- delivery is not at this record (an earlier reply was lost: nothing written; read the
-- progress again), 0 = counted (retry later), 1 = dead-lettered.
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #pending == 0 or pending[1][2] ~= ARGV[9] then return {-1, 0} end
local at = tonumber(redis.call('HGET', KEYS[3], ARGV[2] .. ':next') or '0')
if at ~= tonumber(ARGV[7]) - 1 then return {-2, 0} end
local attempts = redis.call('HINCRBY', KEYS[3], ARGV[2], 1)
if ARGV[6] ~= '1' and attempts < tonumber(ARGV[3]) then return {0, attempts} end
local args = {}
for i = 10, #ARGV do args[#args + 1] = ARGV[i] end
args[#args + 1] = 'reason'
args[#args + 1] = ARGV[4]
args[#args + 1] = 'attempts'
args[#args + 1] = tostring(attempts)
args[#args + 1] = 'outbox_entry_id'
args[#args + 1] = ARGV[2]
args[#args + 1] = 'dlq_ms'
args[#args + 1] = ARGV[5]
redis.call('XADD', KEYS[2], '*', unpack(args))
local next_field = ARGV[2] .. ':next'
if ARGV[8] == '1' then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  redis.call('XDEL', KEYS[1], ARGV[2])
  redis.call('HDEL', KEYS[3], ARGV[2], next_field)
else
  redis.call('HSET', KEYS[3], next_field, ARGV[7])
  redis.call('HDEL', KEYS[3], ARGV[2])
end
return {1, attempts}
