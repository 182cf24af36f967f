-- Shared by read.lua and write.lua: memvault.backends.redis_ops prepends it to each.
--
-- A session is six keys sharing one hash tag (so one cluster slot):
--   meta   hash  head, depth, base, version, next (node id), created, updated,
--                expires (absent: never), snaps (snapshot sequence)
--   msgs   hash  node id -> encoded message
--   links  hash  node id -> "parent:depth:message id"
--   ids    hash  message id -> node id (idempotent appends)
--   snaps  hash  snapshot name -> JSON [seq, head, base, version, length, created, auto]
--   log    list  JSON events [version, op, writer, at, head0, base0, head1, base1, detail]
-- Timestamps are kept as the client's decimal text: Lua would round them to 14 digits.
local META, MSGS, LINKS, IDS, SNAPS, LOG = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

local function load()
  local v = redis.call('HMGET', META, 'head', 'depth', 'base', 'version', 'next', 'created',
                       'updated', 'expires', 'snaps')
  if not v[1] then return nil end
  return {head = tonumber(v[1]), depth = tonumber(v[2]), base = tonumber(v[3]),
          version = tonumber(v[4]), next = tonumber(v[5]), created = v[6], updated = v[7],
          expires = v[8] or nil, snaps = tonumber(v[9])}
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

-- parent, depth, message id of a node (found by position: ids may hold any byte).
local function parse_link(v)
  local a = string.find(v, ':', 1, true)
  local b = string.find(v, ':', a + 1, true)
  return tonumber(string.sub(v, 1, a - 1)), tonumber(string.sub(v, a + 1, b - 1)),
         string.sub(v, b + 1)
end

local function link(node)
  return parse_link(redis.call('HGET', LINKS, node))
end

-- The `count` nodes from `head` back, oldest first: {node, depth, message id}.
local function chain(head, count)
  local out, node = {}, head
  for i = count, 1, -1 do
    local parent, depth, id = link(node)
    out[i] = {node, depth, id}
    node = parent
  end
  return out
end
