-- Runs after lease_held.lua.
-- KEYS: lease, fencing counter; ARGV: held value "{token} {owner}", ttl ms.
-- Extends the lease; an expired lease that nobody took since (the counter still holds our
-- token) is taken back under the same token. Returns 1 when held now, else 0.
if ARGV[1] ~= '' and lease_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 1 end
return 0
