-- Read operations: ARGV = op, now (client clock), op arguments. Never writes, so it
-- runs while the server is out of memory. '' stands for None in every argument.
local op, now = ARGV[1], tonumber(ARGV[2])
local row = live(now)

if op == 'history' then
  if not row then return {} end
  local count = row.depth - row.base
  if ARGV[3] ~= '' then count = math.min(tonumber(ARGV[3]), count) end
  local bodies, depths = newest(row, count)
  if not bodies then return {'corrupt', depths, 'chain'} end
  local reply = {}
  for i = 1, count do
    reply[2 * i - 1] = depths[i]
    reply[2 * i] = bodies[i]
  end
  return reply
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
