-- Reads the session index (write.lua keeps it): KEYS[1] the marker that says it holds
-- every session, KEYS[2] one order's sorted set. ARGV: 'desc' to walk down (else ''),
-- how many ids to return, match (text an id must hold, '' for any), budget, then the
-- position to start after, if any: its key (a decimal; '' in the id order, where every
-- score is 0) and its id.
-- Replies {0} while the index is not built, else {1, last, its score, found}: `found`
-- holds up to `count` ids from the position on, each followed by its score; `last` is
-- the last id looked at, to go on from ('' when the set has no more). A match looks at
-- about `budget` ids per call, so a rare match never blocks the server for long.
local Z = KEYS[2]
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local desc, count, match = ARGV[1] == 'desc', tonumber(ARGV[2]), ARGV[3]
local budget = tonumber(ARGV[4])
local key, after = ARGV[5], ARGV[6]

-- a < b byte by byte, as the sorted set orders members (Lua's < follows the locale)
local function less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- How many members sort before the position (key, after), and whether it is one.
local function below()
  local score = redis.call('ZSCORE', Z, after)
  if score and (key == '' or tonumber(score) == tonumber(key)) then
    return redis.call('ZRANK', Z, after), true
  end
  if key == '' then return redis.call('ZLEXCOUNT', Z, '-', '(' .. after), false end
  -- the ids tied at that key hold ranks lo..hi-1: find the first one after the id
  local lo = redis.call('ZCOUNT', Z, '-inf', '(' .. key)
  local hi = redis.call('ZCOUNT', Z, '-inf', key)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if less(after, redis.call('ZRANGE', Z, mid, mid)[1]) then hi = mid else lo = mid + 1 end
  end
  return lo, false
end

-- the first rank to read (ZREVRANGE's ranks when walking down)
local rank = 0
if after then
  local before, present = below()
  if desc then
    rank = redis.call('ZCARD', Z) - before
  else
    rank = before
    if present then rank = rank + 1 end
  end
end
local range = desc and 'ZREVRANGE' or 'ZRANGE'
local found, seen, step = {}, 0, count
if match ~= '' then step = math.min(budget, 1000) end
while true do
  local got = redis.call(range, Z, rank, rank + step - 1, 'WITHSCORES')
  for i = 1, #got, 2 do
    seen = seen + 1
    if match == '' or string.find(got[i], match, 1, true) then
      local n = #found
      found[n + 1], found[n + 2] = got[i], got[i + 1]
      if #found == 2 * count then return {1, got[i], got[i + 1], found} end
    end
  end
  if #got < 2 * step then return {1, '', '', found} end
  if seen >= budget then return {1, got[#got - 1], got[#got], found} end
  rank = rank + step
end
