-- Shared by read.lua and write.lua: memvault.backends.redis.ops prepends it to each.
--
-- A session is six keys sharing one hash tag (so one cluster slot):
--   meta   hash  head, depth, base, version, next (node id), created, updated,
--                expires (absent: never), snaps (snapshot sequence), run (below),
--                summary, through (the summary pointer; absent: none), stamp (on a
--                cluster: orders the session's states for its index; see write.lua)
--   msgs   hash  node id -> encoded message
--   links  hash  node id -> "parent:depth:message id"
--   ids    hash  message id -> node id (idempotent appends)
--   snaps  hash  snapshot name -> JSON [seq, head, base, version, length, created, auto,
--                summary, through] (the last two absent in older snapshots: none)
-- A summary is a node off the chain: its link is "previous summary:through:id".
--   log    list  JSON events [version, op, writer, at, head0, base0, head1, base1, detail]
-- Timestamps are kept as the client's decimal text: Lua would round them to 14 digits.
-- run: nodes run..head lie on the chain one id apart (each one's parent is the id
-- below it), so reads of the newest messages need no link lookup. Any lower bound of
-- that stretch will do; absent (sessions written before it existed): unknown.
local META, MSGS, LINKS, IDS, SNAPS, LOG = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

local function load()
  local v = redis.call('HMGET', META, 'head', 'depth', 'base', 'version', 'next', 'created',
                       'updated', 'expires', 'snaps', 'run', 'summary', 'through', 'stamp')
  if not v[1] then return nil end
  return {head = tonumber(v[1]), depth = tonumber(v[2]), base = tonumber(v[3]),
          version = tonumber(v[4]), next = tonumber(v[5]), created = v[6], updated = v[7],
          expires = v[8] or nil, snaps = tonumber(v[9]), run = tonumber(v[10]),
          summary = tonumber(v[11]) or 0, through = tonumber(v[12]) or 0, stamp = v[13] or nil}
end

-- The context view shows the chain above the floor, after the summary if some of
-- its range lies above base (the engine's Row.floor and Row.shows_summary).
local function floor_of(row)
  return math.max(row.base, row.through)
end

local function shows_summary(row)
  return row.summary ~= 0 and row.through > row.base
end

-- How many messages the context view shows (info's length): a shown summary counts.
local function view_length(row)
  local view = row.depth - floor_of(row)
  if shows_summary(row) then view = view + 1 end
  return view
end

local function expired(row, now)
  return row.expires ~= nil and tonumber(row.expires) <= now
end

-- The session if it exists and has not expired by the client's clock `now`.
local function live(now)
  local row = load()
  if row and expired(row, now) then return nil end
  return row
end

-- A link is "parent:depth:message id"; the id is all that follows the second colon
-- (it may hold any byte). LINK captures parent, depth and where the id starts.
local LINK = '^(%d+):(%d+):()'

local function parse_link(v)
  local parent, depth, at = string.match(v, LINK)
  return tonumber(parent), tonumber(depth), string.sub(v, at)
end

-- The snapshot record `value` of the session `row`, decoded; nil if it cannot be
-- decoded or its pointers cannot be right (model.check_snapshot).
local function snapshot_of(row, value)
  local ok, s = pcall(cjson.decode, value)
  if not ok or type(s) ~= 'table' then return nil end
  for k = 2, 5 do
    if type(s[k]) ~= 'number' or s[k] < 0 then return nil end
  end
  if s[2] >= row.next or (s[2] == 0) ~= (s[3] + s[5] == 0) then return nil end
  return s
end

-- Lua's unpack() refuses a few thousand values: long argument lists go in slices.
local SLICE = 500

-- HMGET of any number of fields; missing ones are false. The first slice's reply is
-- the result table itself (most calls have one slice).
local function hmget(key, fields)
  local out = {}
  for first = 1, #fields, SLICE do
    local got = redis.call('HMGET', key, unpack(fields, first, math.min(first + SLICE - 1,
                                                                       #fields)))
    if first == 1 then
      out = got
    else
      for k = 1, #got do out[first + k - 1] = got[k] end
    end
  end
  return out
end

-- HSET of any number of field, value pairs (a flat list).
local function hset(key, flat)
  for first = 1, #flat, 2 * SLICE do
    redis.call('HSET', key, unpack(flat, first, math.min(first + 2 * SLICE - 1, #flat)))
  end
end

-- The `count` nodes from `head` (at depth `top`) back, oldest first: their ids,
-- depths and (with `with_ids`) message ids, in three lists; or nil and the depth
-- where the chain is broken (a link missing, or not one level below the last: a
-- node that is its own parent, or a link into another branch). Never more than
-- `count` steps.
-- Along a chain node ids mostly run down one by one (an append after a pop or a
-- rollback breaks the run), so one HMGET guesses the next ids at once; where a
-- guess fails, the walk asks again from the real parent, for fewer ids.
local function chain(head, top, count, with_ids)
  local nodes, depths, ids = {}, {}, {}
  local node, left, want = head, count, SLICE
  while left > 0 do
    local guess = {}
    for k = 1, math.min(left, want) do guess[k] = node - k + 1 end
    local links, used = redis.call('HMGET', LINKS, unpack(guess)), 0
    for k = 1, #guess do
      if guess[k] ~= node then break end
      local expect, parent, depth, at = top - count + left, nil, nil, nil
      if links[k] then parent, depth, at = string.match(links[k], LINK) end
      if tonumber(depth) ~= expect then return nil, expect end
      nodes[left], depths[left] = node, expect
      if with_ids then ids[left] = string.sub(links[k], at) end
      left, node, used = left - 1, tonumber(parent), k
    end
    if used < #guess then want = math.max(4, 2 * used) else want = math.min(SLICE, 2 * want) end
  end
  return nodes, depths, ids
end

-- chain(head, top, count, with_ids), and each node's message (false where it is
-- missing); or nil and the depth where the chain is broken.
local function messages(head, top, count, with_ids)
  local nodes, depths, ids = chain(head, top, count, with_ids)
  if not nodes then return nil, depths end
  return hmget(MSGS, nodes), depths, ids
end

-- The `count` newest nodes of the session `row` (oldest first): their messages and
-- depths (or nil and where the chain is broken). Within the run (see above) ids and
-- depths count down from the head's.
local function newest(row, count)
  if row.run and row.head - row.run + 1 >= count then
    local nodes, depths = {}, {}
    for i = 1, count do
      nodes[i], depths[i] = row.head - count + i, row.depth - count + i
    end
    return hmget(MSGS, nodes), depths
  end
  return messages(row.head, row.depth, count, false)
end
