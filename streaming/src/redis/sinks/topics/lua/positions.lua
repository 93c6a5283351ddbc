-- Positions of records in an outbox, '{ms}-{seq}/{index}' (the outbox entry's id and the
-- record's index in it), as the forwarding scripts compare them; prepended to
-- forward_guard.lua and topic_forward.lua.

-- Whether decimal string a < b as numbers (no leading zeros; exact beyond 2^53).
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local function parse(p)
  return string.match(p, '^(%d+)-(%d+)/(%d+)$')
end

-- Whether position a is after position b: milliseconds, then sequence, then index.
local function after(a, b)
  local ams, aseq, ai = parse(a)
  local bms, bseq, bi = parse(b)
  if ams ~= bms then return less(bms, ams) end
  if aseq ~= bseq then return less(bseq, aseq) end
  return less(bi, ai)
end

