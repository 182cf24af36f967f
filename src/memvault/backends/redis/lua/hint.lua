-- The session index on a Redis Cluster (docs/redis.md, "Listing sessions"): the same
-- sorted sets as on a single server, hash-tagged into one slot, kept by this script
-- after each write (a script cannot reach the index from the session's slot).
--   KEYS[1..5]  sorted sets  by id (score 0), version, length, update time, expiry
--   KEYS[6]     hash         pending: generation -> session id, one per write begun
--                            and not yet indexed (a page settles what is left)
--   KEYS[7]     hash         session id -> the stamp of the state its entries hold
--   KEYS[8]     string       the last generation handed out
-- ARGV[1] is the operation.
local op = ARGV[1]
local PENDING, STAMPS, GENERATION = KEYS[6], KEYS[7], KEYS[8]

local function unindex(id)
  for k = 1, 5 do redis.call('ZREM', KEYS[k], id) end
  redis.call('HDEL', STAMPS, id)
end

if op == 'begin' then
  -- ARGV[2]: the session about to be written; ARGV[3]: a generation to go above (the
  -- fence that refused the write, when the counter lost its value: '' else). Returns
  -- the write's generation.
  local generation = redis.call('INCR', GENERATION)
  if ARGV[3] ~= '' and generation <= tonumber(ARGV[3]) then
    generation = tonumber(ARGV[3]) + 1
    redis.call('SET', GENERATION, generation)
  end
  redis.call('HSET', PENDING, generation, ARGV[2])
  return generation
end

if op == 'apply' then
  -- ARGV: now, how many generations to clear, those generations, then per session:
  -- id, stamp, version ('' when the session is gone), length, updated, expiry, and
  -- '1' when the write created it. An entry older than the one indexed is ignored:
  -- two writers' updates may arrive in either order.
  local now, cleared = ARGV[2], tonumber(ARGV[3])
  local created = false
  for i = 4, 3 + cleared do redis.call('HDEL', PENDING, ARGV[i]) end
  for i = 4 + cleared, #ARGV, 7 do
    local id, stamp = ARGV[i], tonumber(ARGV[i + 1])
    local held = tonumber(redis.call('HGET', STAMPS, id))
    if not held or stamp >= held then
      if ARGV[i + 2] == '' then
        unindex(id)
      else
        redis.call('ZADD', KEYS[1], 0, id)
        redis.call('ZADD', KEYS[2], ARGV[i + 2], id)
        redis.call('ZADD', KEYS[3], ARGV[i + 3], id)
        redis.call('ZADD', KEYS[4], ARGV[i + 4], id)
        redis.call('ZADD', KEYS[5], ARGV[i + 5], id)
        redis.call('HSET', STAMPS, id, ARGV[i + 1])
      end
    end
    created = created or ARGV[i + 6] == '1'
  end
  -- as on a single server, each session created unindexes up to two that expired
  if created then
    local gone = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. now, 'LIMIT', 0, 2)
    for _, id in ipairs(gone) do unindex(id) end
  end
  return 1
end
return redis.error_reply('memvault: unknown index operation ' .. op)
