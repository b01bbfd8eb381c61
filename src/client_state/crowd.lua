-- One page view of a pass holder on a datacenter network, counted across every replica
-- (client_state/store.rs, Store::crowd): the page views of all pass holders behind the network
-- and behind the address, each decaying with a time constant of a minute (so at a steady rate,
-- the page views a minute), as each replica's own crowd counts them.
--
-- KEYS[1]  the network's:  quagmire:{crowd:<network>}          a hash of pages, at
-- KEYS[2]  the address's:  quagmire:{crowd:<network>}:<address> (same hash tag, same slot)
-- ARGV     the time constant (s), idle timeout (ms)
--
-- Returns { the network's page views, the address's } with this one, as strings (a Lua number
-- returned to Redis loses its fraction).

local tau = tonumber(ARGV[1])
local idle_ms = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000

local function add(key)
  local old = redis.call('HMGET', key, 'pages', 'at')
  local pages = tonumber(old[1]) or 0
  local at = tonumber(old[2]) or now
  local elapsed = now - at
  if elapsed < 0 then
    elapsed = 0
    now = at
  end
  pages = pages * math.exp(-elapsed / tau) + 1
  redis.call('HSET', key, 'pages', tostring(pages), 'at', tostring(now))
  redis.call('PEXPIRE', key, idle_ms)
  return tostring(pages)
end

return { add(KEYS[1]), add(KEYS[2]) }
