-- Write operations: each checks everything before its first change, so one that
-- answers an error status has written nothing. ARGV[1] is the operation; '' stands
-- for None. The server refuses the whole script when it is out of memory.
--
-- On a Redis Cluster KEYS[7] is the session's fence and ARGV[1] the write's generation
-- (handed out by hint.lua's 'begin', then removed from ARGV): a write whose generation
-- is at or below the fence is refused ({'fenced', fence}, nothing written; the client
-- begins again above it), and every other reply is {reply, entry()} for the index
-- (hint.lua's 'apply').
local FENCED = #KEYS == 7
local generation = 0
if FENCED then generation = tonumber(table.remove(ARGV, 1)) end
local op = ARGV[1]

-- The session index (docs/redis.md, "Listing sessions"), kept by every write in the
-- same step. Only on a single server: on a cluster the scripts get the session's six
-- keys alone (no key outside its slot) and pages scan the key space.
--   KEYS[7]      sorted set  the session ids, every score 0 (ordered by their bytes)
--   KEYS[8..11]  sorted sets the session ids scored by version, length, update time and
--                            expiry (never: NEVER); ties are ordered by the ids' bytes
-- Times are the decimal texts the session stores: Redis parses them exactly.
local INDEXED = #KEYS > 7
local NEVER = '1e308'
-- Whether this write created the session (the cluster's index then prunes, as below).
local created = false

-- The server's clock in microseconds, as decimal text (Lua's tostring keeps 14 digits).
local function clock()
  local t = redis.call('TIME')
  return string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
end

-- The session as the cluster's index should hold it (hint.lua 'apply'): {stamp,
-- version, length, updated, expiry, '1' if this write created it}; {stamp} when it
-- is gone or expired. A stamp orders the session's states: it grows with every write
-- and is the server's clock once the session is gone.
local function entry()
  local row = live(tonumber(ARGV[2]))
  if not row then return {clock()} end
  return {row.stamp or '0', row.version, view_length(row), row.updated, row.expires or NEVER,
          created and '1' or ''}
end

-- This session's id: its keys' hash tag, percent-decoded.
local function session_id()
  local tag = string.match(META, '{([^}]*)}')
  return (string.gsub(tag, '%%(%x%x)', function(h) return string.char(tonumber(h, 16)) end))
end

local function unindex(id)
  for k = 7, 11 do redis.call('ZREM', KEYS[k], id) end
end

-- Index the session `r` as updated at `updated` and expiring at `expiry`; `new`: it
-- may not be in the index yet.
local function index(r, updated, expiry, new)
  local id = session_id()
  if new then redis.call('ZADD', KEYS[7], 0, id) end
  redis.call('ZADD', KEYS[8], r.version, id)
  redis.call('ZADD', KEYS[9], view_length(r), id)
  redis.call('ZADD', KEYS[10], updated, id)
  redis.call('ZADD', KEYS[11], expiry, id)
end

-- Unindex up to `count` sessions that expired before `now` (a decimal): Redis drops
-- their keys by TTL without running a script, so each write that creates a session
-- clears up to two of them (the index grows only there: the entries of expired
-- sessions cannot pile up).
local function prune(now, count)
  local gone = redis.call('ZRANGEBYSCORE', KEYS[11], '-inf', '(' .. now, 'LIMIT', 0, count)
  for _, id in ipairs(gone) do unindex(id) end
end

local function drop_all()
  redis.call('DEL', META, MSGS, LINKS, IDS, SNAPS, LOG)
  if INDEXED then unindex(session_id()) end
end

local function run()
if op == 'reindex' then
  -- ARGV[2]: now. Index the session as stored, or unindex it if it is gone or expired
  -- (a stale entry a page met, or the first listing of a store written before the
  -- index existed).
  local row = live(tonumber(ARGV[2]))
  if row then
    index(row, row.updated, row.expires or NEVER, true)
  else
    unindex(session_id())
  end
  return
end

if op == 'delete' then
  -- ARGV[2]: now. 1 if the session existed and had not expired (expired keys the
  -- server has not dropped yet are removed too, and answer 0, like every read).
  local row = load()
  drop_all()
  if row and not expired(row, tonumber(ARGV[2])) then return 1 end
  return 0
end

if op == 'compact' then
  -- ARGV: now, events to keep per session. Returns {nodes, events, sessions} removed,
  -- or, with nothing removed, {'damaged', 'snapshot', name} or {'damaged', 'event', n}
  -- for a record it needs that cannot be decoded or whose pointers cannot be right
  -- (what it reaches is then unknown), or {'corrupt', depth, 'chain'}.
  local now, keep = tonumber(ARGV[2]), ARGV[3]
  local row = load()
  if not row then return {0, 0, 0} end
  if expired(row, now) then
    local nodes = redis.call('HLEN', MSGS)
    drop_all()
    return {nodes, 0, 1}
  end
  -- the events to drop are trimmed only once the walk below found nothing broken
  local dropped = 0
  if keep ~= '' then dropped = math.max(0, redis.call('LLEN', LOG) - tonumber(keep)) end
  local pointers, summaries = {{row.head, row.base}}, {row.summary}
  local snaps = redis.call('HGETALL', SNAPS)
  for i = 1, #snaps, 2 do
    local s = snapshot_of(row, snaps[i + 1])
    if not s then return {'damaged', 'snapshot', snaps[i]} end
    pointers[#pointers + 1] = {s[2], s[3]}
    summaries[#summaries + 1] = s[8] or 0
  end
  for i, v in ipairs(redis.call('LRANGE', LOG, dropped, -1)) do
    local ok, e = pcall(cjson.decode, v)
    if not ok or type(e) ~= 'table' then return {'damaged', 'event', dropped + i} end
    for k = 5, 8 do
      if type(e[k]) ~= 'number' then return {'damaged', 'event', dropped + i} end
    end
    pointers[#pointers + 1] = {e[5], e[6]}
    pointers[#pointers + 1] = {e[7], e[8]}
  end
  local links, flat = {}, redis.call('HGETALL', LINKS)
  for i = 1, #flat, 2 do
    local parent, depth, id = parse_link(flat[i + 1])
    links[tonumber(flat[i])] = {parent, depth, id}
  end
  -- lowest base each node was reached with: a walk stops where an earlier one
  -- already covered everything below. A walk that finds no node one level below
  -- the last refuses the whole session, as engine._reachable does: what lies
  -- below the break may still be wanted.
  local reached = {}
  for _, p in ipairs(pointers) do
    local node, base = p[1], p[2]
    local depth = links[node] and links[node][2] or base
    while depth > base do
      if not links[node] or links[node][2] ~= depth then
        return {'corrupt', depth, 'chain'}
      end
      if reached[node] and reached[node] <= base then break end
      reached[node] = base
      node, depth = links[node][1], depth - 1
    end
  end
  -- summaries pointed at, and the earlier ones behind each (engine._summaries)
  local kept = {}
  for _, node in ipairs(summaries) do
    while links[node] and not kept[node] do
      kept[node] = true
      node = links[node][1]
    end
  end
  if dropped > 0 then redis.call('LTRIM', LOG, dropped, -1) end
  local dead = 0
  for node, l in pairs(links) do
    if not reached[node] and not kept[node] then
      redis.call('HDEL', MSGS, node)
      redis.call('HDEL', LINKS, node)
      redis.call('HDEL', IDS, l[3])
      dead = dead + 1
    end
  end
  return {dead, dropped, 0}
end

-- Every other operation: ARGV[2..5] = now, writer, expires_at (seconds), the same
-- expiry in unix milliseconds for PEXPIREAT; its own arguments from ARGV[6].
local now_text, writer, expires, expire_ms = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local now = tonumber(now_text)
local row = live(now)

-- The row to write to; an expired session's leftovers go first.
local function start(current)
  if current then return current end
  created = true
  drop_all()
  if INDEXED then prune(now_text, 2) end
  return {head = 0, depth = 0, base = 0, version = 0, next = 1, created = now_text, snaps = 0,
          run = 1, summary = 0, through = 0, new = true}
end

-- Chain the (id, message) pairs ARGV[first..] onto the head.
local function add_nodes(r, first)
  -- the first new node's parent is the head: the run goes on if that is the id below
  if not r.run or r.head ~= r.next - 1 then r.run = r.next end
  local msgs, links, ids = {}, {}, {}
  for i = first, #ARGV, 2 do
    local node, n = r.next, #msgs
    msgs[n + 1], msgs[n + 2] = node, ARGV[i + 1]
    links[n + 1], links[n + 2] = node, r.head .. ':' .. (r.depth + 1) .. ':' .. ARGV[i]
    ids[n + 1], ids[n + 2] = ARGV[i], node
    r.head, r.depth, r.next = node, r.depth + 1, node + 1
  end
  hset(MSGS, msgs)
  hset(LINKS, links)
  hset(IDS, ids)
end

-- Store a summary off the chain (link: previous summary, through, id); point at it.
local function add_summary(r, id, message, through)
  local node = r.next
  redis.call('HSET', MSGS, node, message)
  redis.call('HSET', LINKS, node, r.summary .. ':' .. through .. ':' .. id)
  redis.call('HSET', IDS, id, node)
  r.summary, r.through, r.next = node, through, node + 1
end

local function save_snapshot(r, name, auto)
  r.snaps = r.snaps + 1
  local value = cjson.encode({r.snaps, r.head, r.base, r.version, r.depth - r.base, now_text,
                              auto, r.summary, r.through})
  redis.call('HSET', SNAPS, name, value)
  return value
end

-- Save the row, log the event, and give every key of the session the same expiry.
local function commit(r, name, head0, base0, detail, bump)
  if bump then r.version = r.version + 1 end
  local fields = {'head', r.head, 'depth', r.depth, 'base', r.base, 'version', r.version,
                  'next', r.next, 'created', r.created, 'updated', now_text, 'snaps', r.snaps,
                  'summary', r.summary, 'through', r.through}
  if r.run then fields[#fields + 1], fields[#fields + 2] = 'run', r.run end
  if FENCED then
    local stamp = string.format('%.0f', math.max(tonumber(clock()), (tonumber(r.stamp) or 0) + 1))
    fields[#fields + 1], fields[#fields + 2] = 'stamp', stamp
  end
  if expires ~= '' then fields[#fields + 1], fields[#fields + 2] = 'expires', expires end
  redis.call('HSET', META, unpack(fields))
  redis.call('RPUSH', LOG, cjson.encode({r.version, name, writer, now_text, head0, base0,
                                         r.head, r.base, detail}))
  if expires ~= '' then
    for k = 1, 6 do redis.call('PEXPIREAT', KEYS[k], expire_ms) end
  elseif r.expires then
    redis.call('HDEL', META, 'expires')
    for k = 1, 6 do redis.call('PERSIST', KEYS[k]) end
  end
  if INDEXED then
    local expiry = expires
    if expiry == '' then expiry = NEVER end
    index(r, now_text, expiry, r.new)
  end
end

if op == 'append' then
  -- ARGV[6] expected version, ARGV[7] expected message id ('' for none), then
  -- (id, message) pairs.
  local count = (#ARGV - 7) / 2
  local stored = {}
  if row then
    local ids = {}
    for i = 8, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
    local nodes = hmget(IDS, ids)
    for k = 1, #ids do
      if nodes[k] then stored[#stored + 1] = ids[k] end
    end
  end
  if #stored == count then return {'ok', row.version} end
  if #stored > 0 then
    table.insert(stored, 1, 'duplicate')
    return stored
  end
  local current = row and row.version or 0
  if ARGV[6] ~= '' and tonumber(ARGV[6]) ~= current then return {'conflict', current} end
  if ARGV[7] ~= '' and not (row and redis.call('HEXISTS', IDS, ARGV[7]) == 1) then
    return {'not_stored'}
  end
  row = start(row)
  local head0, base0 = row.head, row.base
  add_nodes(row, 8)
  commit(row, 'append', head0, base0, {messages = count}, true)
  return {'ok', row.version}
elseif op == 'pop' then
  -- ARGV[6]: the SHA-1 of the message the client read and decoded (history, last 1).
  -- Pops it if it is still the one to pop: {depth, message}; else changes nothing
  -- and answers {'moved'}. false when empty, or {'corrupt', depth, what}. With
  -- nothing after the summary, the pop undoes the summary (the previous one is back)
  -- and returns it.
  if not row then return false end
  local node, expect, undo = row.head, row.depth, row.depth <= floor_of(row)
  if undo then
    if not shows_summary(row) then return false end
    node, expect = row.summary, row.through
  end
  local link, parent, depth, id = redis.call('HGET', LINKS, node), nil, nil, nil
  if link then parent, depth, id = parse_link(link) end
  if depth ~= expect then return {'corrupt', expect, 'chain'} end
  if not undo and depth - 1 > row.base then
    -- the new head (unless hidden: compact may have deleted it) sits one level lower
    local below = redis.call('HGET', LINKS, parent)
    if not below or select(2, parse_link(below)) ~= depth - 1 then
      return {'corrupt', depth - 1, 'chain'}
    end
  end
  local message = redis.call('HGET', MSGS, node)
  if not message then return {'corrupt', depth, 'missing'} end
  if redis.sha1hex(message) ~= ARGV[6] then return {'moved'} end
  local head0, base0 = row.head, row.base
  if undo then
    local through = 0
    if parent ~= 0 then
      local previous = redis.call('HGET', LINKS, parent)
      if not previous then return {'corrupt', depth, 'missing'} end
      local _, previous_through = parse_link(previous)
      through = previous_through
    end
    row.summary, row.through = parent, through
    commit(row, 'pop', head0, base0, {summary_id = id}, true)
  else
    row.head, row.depth = parent, depth - 1
    if row.run and parent < row.run then row.run = parent end
    commit(row, 'pop', head0, base0, {message_id = id}, true)
  end
  return {depth, message}
elseif op == 'trim' then
  -- ARGV[6] messages to keep, ARGV[7] the operation's name (trim or clear).
  if not row then return 0 end
  local base = math.max(row.base, row.depth - tonumber(ARGV[6]))
  if base == row.base then return row.version end
  local head0, base0 = row.head, row.base
  row.base = base
  commit(row, ARGV[7], head0, base0, {hidden = base - base0}, true)
  return row.version
elseif op == 'snapshot' then
  local name = ARGV[6]
  if row and redis.call('HEXISTS', SNAPS, name) == 1 then return {'exists'} end
  row = start(row)
  local value = save_snapshot(row, name, false)
  commit(row, 'snapshot', row.head, row.base, {name = name}, false)
  return {'ok', value}
elseif op == 'rollback' then
  -- ARGV[6] the snapshot, ARGV[7] the auto-snapshot name without its version.
  local name = ARGV[6]
  local target = row and redis.call('HGET', SNAPS, name)
  if not target then return {'missing'} end
  target = snapshot_of(row, target)
  if not target then return {'damaged'} end
  local saved_name = ARGV[7] .. row.version
  local saved = save_snapshot(row, saved_name, true)
  local head0, base0 = row.head, row.base
  row.head, row.base, row.depth = target[2], target[3], target[3] + target[5]
  row.summary, row.through = target[8] or 0, target[9] or 0
  row.run = row.head
  commit(row, 'rollback', head0, base0, {to = name, saved = saved_name}, true)
  return {'ok', saved_name, saved}
elseif op == 'fork' then
  -- Writes the new session: ARGV[6] source id, ARGV[7] snapshot name, ARGV[8] '1'
  -- when the source had no such snapshot, ARGV[9..11] the summary's id, message and
  -- through ('0': none), then the (id, message) pairs to copy.
  if row then return {'conflict'} end
  if ARGV[8] == '1' then return {'missing'} end
  row = start(nil)
  add_nodes(row, 12)
  if ARGV[11] ~= '0' then add_summary(row, ARGV[9], ARGV[10], tonumber(ARGV[11])) end
  local detail = {from = ARGV[6], at = cjson.null}
  if ARGV[7] ~= '' then detail.at = ARGV[7] end
  commit(row, 'fork', 0, 0, detail, true)
  return {'ok'}
elseif op == 'summarize' then
  -- ARGV[6] expected version, ARGV[7] the through id, ARGV[8] and ARGV[9] the summary's
  -- id and message. Checks in the engine's order (Engine.summarize).
  local stored = row and redis.call('HGET', IDS, ARGV[8])
  if stored then
    if tonumber(stored) == row.summary then return {'ok', row.version} end
    return {'duplicate'}
  end
  local current = row and row.version or 0
  if ARGV[6] ~= '' and tonumber(ARGV[6]) ~= current then return {'conflict', current} end
  local target = row and redis.call('HGET', IDS, ARGV[7])
  if not target then return {'unknown'} end
  target = tonumber(target)
  local at = redis.call('HGET', LINKS, target)
  if not at then return {'corrupt', row.depth, 'missing'} end
  local _, depth = parse_link(at)
  if depth <= row.base or depth > row.depth then return {'hidden'} end
  local nodes, broken = chain(row.head, row.depth, row.depth - depth + 1, false)
  if not nodes then return {'corrupt', broken, 'chain'} end
  if nodes[1] ~= target then return {'hidden'} end
  if depth <= row.through then return {'summarized'} end
  local folded = depth - floor_of(row)
  add_summary(row, ARGV[8], ARGV[9], depth)
  commit(row, 'summarize', row.head, row.base,
         {summary_id = ARGV[8], through = ARGV[7], messages = folded}, true)
  return {'ok', row.version}
end
return redis.error_reply('memvault: unknown write operation ' .. op)
end

if not FENCED then return run() end
local fence = tonumber(redis.call('GET', KEYS[7]) or '0')
if op == 'fence' then
  -- ARGV[2]: now. Refuse every write of this generation or older from now on (a
  -- page settling writes whose index update never came: docs/redis.md).
  if generation > fence then redis.call('SET', KEYS[7], generation, 'EX', 86400) end
  return {'ok', entry()}
end
if generation <= fence then return {'fenced', fence} end
local reply = run()
if reply == nil then reply = false end
return {reply, entry()}
