-- Read operations: ARGV = op, now (client clock), op arguments. Never writes, so it
-- runs while the server is out of memory. '' stands for None in every argument.
local op, now = ARGV[1], tonumber(ARGV[2])
local row = live(now)

if op == 'history' then
  -- The context view's newest ARGV[3] ('' all): the summary only if it fits.
  if not row then return {} end
  local above = row.depth - floor_of(row)
  local count, last = above, tonumber(ARGV[3])
  if last then count = math.min(last, above) end
  local bodies, depths = newest(row, count)
  local reply, k = {}, 0
  if shows_summary(row) and (not last or last > above) then
    reply[1], reply[2], k = row.through, redis.call('HGET', MSGS, row.summary), 2
  end
  for i = 1, count do
    reply[k + 2 * i - 1] = depths[i]
    reply[k + 2 * i] = bodies[i]
  end
  return reply
elseif op == 'full' then
  -- Every message above base, each summary (above base) after its through.
  if not row then return {} end
  local at, node = {}, row.summary
  while node ~= 0 do
    local parent, depth = link(node)
    if depth <= row.base then break end
    at[depth], node = node, parent
  end
  local count = row.depth - row.base
  local bodies, depths = newest(row, count)
  local reply = {}
  for i = 1, count do
    reply[#reply + 1], reply[#reply + 2] = depths[i], bodies[i]
    if at[depths[i]] then
      reply[#reply + 1] = depths[i]
      reply[#reply + 1] = redis.call('HGET', MSGS, at[depths[i]])
    end
  end
  return reply
elseif op == 'info' then
  if not row then return false end
  local summarized = 0
  if shows_summary(row) then summarized = row.through - row.base end
  local view = row.depth - floor_of(row)
  if shows_summary(row) then view = view + 1 end
  return {row.version, view, row.created, row.updated, row.expires or '', summarized}
elseif op == 'snapshots' then
  if not row then return {} end
  return redis.call('HGETALL', SNAPS)
elseif op == 'log' then
  if not row then return {} end
  return redis.call('LRANGE', LOG, 0, -1)
elseif op == 'fork_read' then
  -- What fork copies: {'ok', summary id, summary, its through in the copy (0: no
  -- summary), id, message, ...} oldest first, or {'missing'}.
  local head, count, base, summary, through = 0, 0, 0, 0, 0
  if row then
    head, count, base, summary, through = row.head, row.depth - row.base, row.base,
                                          row.summary, row.through
  end
  if ARGV[3] ~= '' then
    local snap = row and redis.call('HGET', SNAPS, ARGV[3])
    if not snap then return {'missing'} end
    snap = cjson.decode(snap)
    head, count, base, summary, through = snap[2], snap[5], snap[3], snap[8] or 0, snap[9] or 0
  end
  local reply = {'ok', '', '', 0}
  if summary ~= 0 and through > base then
    local _, _, id = link(summary)
    reply[2], reply[3], reply[4] = id, redis.call('HGET', MSGS, summary), through - base
  end
  local bodies, _, ids = messages(head, count, true)
  for i = 1, count do
    reply[2 * i + 3] = ids[i]
    reply[2 * i + 4] = bodies[i]
  end
  return reply
end
return redis.error_reply('memvault: unknown read operation ' .. op)
