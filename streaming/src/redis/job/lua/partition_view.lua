-- What the job client's caught-up check reads of one partition, atomically in one slot:
-- the stream's last entry, the retries due, the groups (none when nothing was written to
-- the partition yet: XINFO GROUPS of a missing stream fails), the commit frontier, the
-- lease, and whether the partition awaits an idle flush (1 or 0).
-- KEYS: stream, retry schedule, frontier, lease, flush mark. ARGV: none.
local groups = {}
if redis.call('EXISTS', KEYS[1]) == 1 then
  groups = redis.call('XINFO', 'GROUPS', KEYS[1])
end
return {
  redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1),
  redis.call('ZRANGE', KEYS[2], 0, -1),
  groups,
  redis.call('GET', KEYS[3]),
  redis.call('GET', KEYS[4]),
  redis.call('EXISTS', KEYS[5]),
}
