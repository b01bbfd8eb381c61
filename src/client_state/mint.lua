-- An accepted answer from one network, counted across every replica (client_state/store.rs,
-- Store::mint), atomically, with Redis's clock: the challenge's id is taken once, whichever
-- replica it reaches; the network's passes minted lately are counted (decaying); and on a
-- datacenter network, past its burst, the pass's turn is booked (a GCRA, as the local economy's).
--
-- KEYS[1]  the network's minting:  quagmire:{net:<network>}:mint, a hash of
--            minted, at  passes minted lately (decayed) and as of when
--            due         the turn queue's theoretical arrival time
-- KEYS[2]  its answered ids:       quagmire:{net:<network>}:used (same hash tag, same slot), a
--          sorted set of challenge ids scored by when their challenge expires (Unix s)
-- ARGV     the id, when its challenge expires (Unix s), the count's half-life (s), 1 on a
--          datacenter network else 0, the turn's interval (s), the turns this answer costs, the
--          burst of turns, the longest a turn is booked ahead (s), ids kept at most, idle (ms)
--
-- Returns { 0 minted, 1 replayed, 2 busy; passes minted lately (with this one; as a string: a
-- Lua number returned to Redis loses its fraction); the turn's delay or, when busy, how long
-- until there is room (ms) }.

local id = ARGV[1]
local expires = tonumber(ARGV[2])
local half_life = tonumber(ARGV[3])
local datacenter = ARGV[4] == '1'
local interval = tonumber(ARGV[5])
local cost = tonumber(ARGV[6])
local burst = tonumber(ARGV[7])
local longest = tonumber(ARGV[8])
local kept = tonumber(ARGV[9])
local idle_ms = tonumber(ARGV[10])

local time = redis.call('TIME')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000

local old = redis.call('HMGET', KEYS[1], 'minted', 'at', 'due')
local minted = tonumber(old[1]) or 0
local at = tonumber(old[2]) or now
local due = tonumber(old[3]) or now
local elapsed = now - at
if elapsed < 0 then
  elapsed = 0
end
minted = minted * math.exp(-elapsed * math.log(2) / half_life)

if redis.call('ZSCORE', KEYS[2], id) then
  return { 1, tostring(minted), 0 }
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', math.floor(now))
if redis.call('ZCARD', KEYS[2]) >= kept then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  local free = (tonumber(first[2]) or now) - now
  if free < 0 then
    free = 0
  end
  return { 2, tostring(minted), math.floor(free * 1000) }
end

local delay = 0
if datacenter then
  if due < now then
    due = now
  end
  due = due + interval * math.max(cost, 1)
  delay = due - now - interval * burst
  if delay < 0 then
    delay = 0
  end
  if delay > longest then
    -- Not booked: no one can make the queue longer than `longest`.
    return { 2, tostring(minted), math.floor((delay - longest) * 1000) }
  end
end

minted = minted + 1
redis.call('ZADD', KEYS[2], expires, id)
redis.call('HSET', KEYS[1], 'minted', tostring(minted), 'at', tostring(now), 'due', tostring(due))
redis.call('PEXPIRE', KEYS[1], idle_ms)
redis.call('PEXPIRE', KEYS[2], idle_ms)
return { 0, tostring(minted), math.floor(delay * 1000) }
