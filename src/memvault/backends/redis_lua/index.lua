-- Reads the session index (write.lua keeps it): KEYS[1] the marker that says it holds
-- every session, KEYS[2] the sorted set of one order. ARGV: from and to (ZRANGEBYLEX
-- bounds), 'desc' to walk down, how many members to return, match (text the id must
-- hold, '' for any), skip (the bytes before the id in a member: 0 or 8).
-- Replies {0} while the index is not built, else {1, last, members}: up to `count`
-- members in order, and the last member looked at ('' when the range has no more), to
-- go on from. A match looks at BUDGET members at most per call, so a rare match never
-- blocks the server for long.
local BUDGET = 10000
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local from, to, count = ARGV[1], ARGV[2], tonumber(ARGV[4])
local match, skip = ARGV[5], tonumber(ARGV[6])
local range = 'ZRANGEBYLEX'
if ARGV[3] == 'desc' then range = 'ZREVRANGEBYLEX' end
local out, seen, step = {}, 0, count
if match ~= '' then step = 1000 end
while seen < BUDGET do
  local got = redis.call(range, KEYS[2], from, to, 'LIMIT', 0, step)
  for _, member in ipairs(got) do
    seen = seen + 1
    if match == '' or string.find(member, match, skip + 1, true) then
      out[#out + 1] = member
      if #out == count then return {1, member, out} end
    end
  end
  if #got < step then return {1, '', out} end
  from = '(' .. got[#got]
end
return {1, string.sub(from, 2), out}
