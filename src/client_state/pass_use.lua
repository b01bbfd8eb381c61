-- One page view of a pass, counted across every replica (client_state/store.rs, Store::pass_use),
-- atomically, with Redis's clock (TIME), the one clock every replica's views meet at.
--
-- KEYS[1]  the pass's use:  quagmire:{pass:<id>}:use  (the pass's client record's hash tag, so
--          the same cluster slot), a hash of
--            due         the page pace's theoretical arrival time (a GCRA, as the local record's)
--            day, pages  when the pass's day started, and its page views in it
--            n:<net>     when it was last used from the network <net>
-- ARGV     the network (text), the pace's interval (s), networks kept (its limit + 1), the
--          networks' window (s), a day (s), idle timeout (ms)
--
-- Returns { how far the pace's arrival time ran ahead of now before this view (ms), page views
-- in the day with this one, networks used from within the window with this one }.

local network = 'n:' .. ARGV[1]
local interval = tonumber(ARGV[2])
local keep = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local day = tonumber(ARGV[5])
local idle_ms = tonumber(ARGV[6])

local time = redis.call('TIME')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000

local fields = redis.call('HGETALL', KEYS[1])
local due, day_start, pages = now, now, 0
local networks, known = 0, false
local oldest, oldest_seen = nil, nil
for i = 1, #fields, 2 do
  local name, value = fields[i], tonumber(fields[i + 1]) or 0
  if name == 'due' then
    due = value
  elseif name == 'day' then
    day_start = value
  elseif name == 'pages' then
    pages = value
  elseif string.sub(name, 1, 2) == 'n:' then
    if now - value > window then
      redis.call('HDEL', KEYS[1], name)
    else
      networks = networks + 1
      if name == network then
        known = true
      end
      if oldest_seen == nil or value < oldest_seen then
        oldest, oldest_seen = name, value
      end
    end
  end
end
if not known then
  -- Bounded like the local record: past the limit, the oldest network makes room.
  if networks >= keep and oldest then
    redis.call('HDEL', KEYS[1], oldest)
  else
    networks = networks + 1
  end
end

-- A failover to a server whose clock is behind must not read as a pass far ahead of its pace.
local ahead = due - now
if ahead < 0 then
  ahead = 0
end
if due < now then
  due = now
end
due = due + interval
if now - day_start > day or now < day_start then
  day_start, pages = now, 0
end
pages = pages + 1

redis.call('HSET', KEYS[1], 'due', tostring(due), 'day', tostring(day_start), 'pages', pages,
  network, tostring(now))
redis.call('PEXPIRE', KEYS[1], idle_ms)
return { math.floor(ahead * 1000), pages, networks }
