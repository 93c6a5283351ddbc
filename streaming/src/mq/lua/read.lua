-- Runs after lease_held.lua.
-- KEYS: stream, lease, fencing counter; ARGV: lease value held, lease ttl ms, group,
--       consumer, count, from id ('>' = new entries), noack ('1' | '0')
-- XREADGROUP (never blocking) if the lease is still ours: a stale owner's read neither
-- moves the group's last-delivered id nor takes entries into its pending list.
if not lease_held(KEYS[2], KEYS[3], ARGV[1], ARGV[2]) then return 'fenced' end
if ARGV[7] == '1' then
  return redis.call('XREADGROUP', 'GROUP', ARGV[3], ARGV[4], 'COUNT', ARGV[5], 'NOACK',
                    'STREAMS', KEYS[1], ARGV[6])
end
return redis.call('XREADGROUP', 'GROUP', ARGV[3], ARGV[4], 'COUNT', ARGV[5],
                  'STREAMS', KEYS[1], ARGV[6])
