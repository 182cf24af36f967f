-- Read operations: ARGV = op, now (client clock), op arguments. Never writes, so it
-- runs while the server is out of memory. '' stands for None in every argument.
local op, now = ARGV[1], tonumber(ARGV[2])
local row = live(now)

-- The reply of history and chain: {depth, message, ...}, oldest first; or
-- {'corrupt', depth, 'chain'} where the chain walked is broken (bodies nil).
local function stored(bodies, depths, count)
  if not bodies then return {'corrupt', depths, 'chain'} end
  local reply = {}
  for i = 1, count do
    reply[2 * i - 1] = depths[i]
    reply[2 * i] = bodies[i]
  end
  return reply
end

-- `count`, at most `last` ('' for no limit), never below 0.
local function limit(count, last)
  if last ~= '' then count = math.min(tonumber(last), count) end
  return math.max(count, 0)
end

if op == 'history' then
  if not row then return {} end
  local count = limit(row.depth - row.base, ARGV[3])
  local bodies, depths = newest(row, count)
  return stored(bodies, depths, count)
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
  return stored(bodies, depths, count)
elseif op == 'info' then
  if not row then return false end
  return {row.version, row.depth - row.base, row.created, row.updated, row.expires or ''}
elseif op == 'snapshots' then
  if not row then return {} end
  return redis.call('HGETALL', SNAPS)
elseif op == 'log' then
  if not row then return {} end
  return redis.call('LRANGE', LOG, 0, -1)
elseif op == 'fork_read' then
  -- What fork copies: {'ok', id, message, ...} oldest first, {'missing'}, or
  -- {'corrupt', depth, what} where the source's chain is damaged.
  local head, top, count = 0, 0, 0
  if row then head, top, count = row.head, row.depth, row.depth - row.base end
  if ARGV[3] ~= '' then
    local snap = row and redis.call('HGET', SNAPS, ARGV[3])
    if not snap then return {'missing'} end
    snap = cjson.decode(snap)
    head, top, count = snap[2], snap[3] + snap[5], snap[5]
  end
  local bodies, depths, ids = messages(head, top, count, true)
  if not bodies then return {'corrupt', depths, 'chain'} end
  local reply = {'ok'}
  for i = 1, count do
    if not bodies[i] then return {'corrupt', depths[i], 'missing'} end
    reply[2 * i] = ids[i]
    reply[2 * i + 1] = bodies[i]
  end
  return reply
end
return redis.error_reply('memvault: unknown read operation ' .. op)
