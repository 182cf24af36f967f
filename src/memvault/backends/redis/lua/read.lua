-- Read operations: ARGV = op, now (client clock), op arguments. Never writes, so it
-- runs while the server is out of memory. '' stands for None in every argument.
local op, now = ARGV[1], tonumber(ARGV[2])
local row = live(now)

-- The reply of history and chain: {depth of the first message, message, ...}, oldest
-- first, each message one level above the one before (their depths are not sent), {}
-- for none; or {'corrupt', depth, 'chain'} where the chain walked is broken (bodies nil).
local function stored(bodies, depths)
  if not bodies then return {'corrupt', depths, 'chain'} end
  if depths[1] then table.insert(bodies, 1, depths[1]) end
  return bodies
end

-- `count`, at most `last` ('' for no limit), never below 0.
local function limit(count, last)
  if last ~= '' then count = math.min(tonumber(last), count) end
  return math.max(count, 0)
end

-- The summary node's link, parsed; nil if it is not stored.
local function summary_link(node)
  local at = redis.call('HGET', LINKS, node)
  if at then return parse_link(at) end
end

if op == 'history' then
  -- The context view's newest ARGV[3] ('' all): the summary only if it fits.
  if not row then return {} end
  local above = row.depth - floor_of(row)
  local count = limit(above, ARGV[3])
  local bodies, depths = newest(row, count)
  local reply = stored(bodies, depths)
  if bodies and shows_summary(row) and (ARGV[3] == '' or tonumber(ARGV[3]) > above) then
    -- all `above` messages are shown: the first lies at through + 1
    reply[1] = row.through
    table.insert(reply, 2, redis.call('HGET', MSGS, row.summary))
  end
  return reply
elseif op == 'full' then
  -- Every message above base, each summary (above base) after its through.
  if not row then return {} end
  local at, node = {}, row.summary
  while node ~= 0 do
    local parent, depth = summary_link(node)
    if not parent then return {'corrupt', row.through, 'missing'} end
    if depth <= row.base then break end
    at[depth], node = node, parent
  end
  local count = row.depth - row.base
  local bodies, depths = newest(row, count)
  if not bodies then return stored(bodies, depths) end
  local reply = {}
  for i = 1, count do
    reply[#reply + 1], reply[#reply + 2] = depths[i], bodies[i]
    if at[depths[i]] then
      reply[#reply + 1] = depths[i]
      reply[#reply + 1] = redis.call('HGET', MSGS, at[depths[i]])
    end
  end
  return reply
elseif op == 'chain' then
  -- ARGV[3] head node, ARGV[4] base, ARGV[5] last: any state the log points to.
  -- A head that is not stored (compacted away) replies false.
  local head = tonumber(ARGV[3])
  if not row or head == 0 then return {} end
  local at = redis.call('HGET', LINKS, head)
  if not at then return false end
  local _, depth = parse_link(at)
  local count = limit(depth - tonumber(ARGV[4]), ARGV[5])
  local bodies, depths = messages(head, depth, count, false)
  return stored(bodies, depths)
elseif op == 'info' then
  if not row then return false end
  local summarized = 0
  if shows_summary(row) then summarized = row.through - row.base end
  return {row.version, view_length(row), row.created, row.updated, row.expires or '', summarized}
elseif op == 'snapshots' then
  -- {next node id, name, record, name, record, ...}
  if not row then return {} end
  local reply = redis.call('HGETALL', SNAPS)
  table.insert(reply, 1, row.next)
  return reply
elseif op == 'log' then
  if not row then return {} end
  return redis.call('LRANGE', LOG, 0, -1)
elseif op == 'fork_read' then
  -- What fork copies: {'ok', summary id, summary, its through in the copy (0: no
  -- summary), id, message, ...} oldest first, {'missing'}, or {'corrupt', depth,
  -- what} where the source's chain is damaged.
  local head, top, count, base, summary, through = 0, 0, 0, 0, 0, 0
  if row then
    head, top, count = row.head, row.depth, row.depth - row.base
    base, summary, through = row.base, row.summary, row.through
  end
  if ARGV[3] ~= '' then
    local snap = row and redis.call('HGET', SNAPS, ARGV[3])
    if not snap then return {'missing'} end
    snap = snapshot_of(row, snap)
    if not snap then return {'damaged'} end
    head, top, count = snap[2], snap[3] + snap[5], snap[5]
    base, summary, through = snap[3], snap[8] or 0, snap[9] or 0
  end
  local bodies, depths, ids = messages(head, top, count, true)
  if not bodies then return {'corrupt', depths, 'chain'} end
  local reply = {'ok', '', '', 0}
  if summary ~= 0 and through > base then
    local _, _, id = summary_link(summary)
    local message = redis.call('HGET', MSGS, summary)
    if not id or not message then return {'corrupt', through, 'missing'} end
    reply[2], reply[3], reply[4] = id, message, through - base
  end
  for i = 1, count do
    if not bodies[i] then return {'corrupt', depths[i], 'missing'} end
    reply[2 * i + 3] = ids[i]
    reply[2 * i + 4] = bodies[i]
  end
  return reply
end
return redis.error_reply('memvault: unknown read operation ' .. op)
