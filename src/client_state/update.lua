-- One client's shared record, updated atomically on the server (client_state/store.rs).
--
-- KEYS[1]  the client's hash:        quagmire:{<client>}
-- KEYS[2]  its last user agent:      quagmire:{<client>}:ua  (a string of its own, so the hash
--          stays small enough for Redis's compact encoding; same hash tag, same cluster slot;
--          kept only for clients with trap hits, the ones /api/trapped lists)
-- ARGV     requests, trap hits (both since the replica's last update), trap half-life (s),
--          request-rate half-life (s), requests per minute, idle timeout (ms), user agent,
--          ASN, AS organisation ('' = not known or not trapped: leave as is; replicas send
--          them for trapped clients only, the ones the admin views list), request burst, how
--          long a trapped client's record outlives its last update (ms: a pass's lifetime)
--
-- The hash holds hits, score, rate, updated (also the last time seen), tat, and for trapped
-- clients first (seen in the store since its first trap hit), asn and org: each field costs
-- every client its bytes.
--
-- Time is Redis's own (TIME), the one clock every replica's updates meet at: replicas' clocks
-- may disagree, and decay computed on two clocks would drift apart. The arithmetic is the local
-- cache's: exponential decay since the last update, then the new requests and hits added; the
-- request quota is a GCRA (a bucket of `burst` requests refilled at `per_minute` a minute), as
-- the local cache computes it.
--
-- Returns { trap hits, trap score, request rate, 1 if over the quota else 0 }; the two decayed
-- values as strings (a Lua number returned to Redis loses its fraction).

local requests = tonumber(ARGV[1])
local hits = tonumber(ARGV[2])
local trap_half_life = tonumber(ARGV[3])
local rate_half_life = tonumber(ARGV[4])
local per_minute = tonumber(ARGV[5])
local idle_ms = tonumber(ARGV[6])
local burst = tonumber(ARGV[10])
local kept_ms = tonumber(ARGV[11]) or idle_ms

local time = redis.call('TIME')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000

local old = redis.call('HMGET', KEYS[1], 'hits', 'score', 'rate', 'updated', 'tat')
local total_hits = (tonumber(old[1]) or 0) + hits
local score = tonumber(old[2]) or 0
local rate = tonumber(old[3]) or 0
local updated = tonumber(old[4]) or now
local tat = tonumber(old[5]) or now

-- A failover to a server whose clock is behind must not make scores grow: no negative decay.
local elapsed = now - updated
if elapsed < 0 then
  elapsed = 0
  now = updated
end
local ln2 = math.log(2)
score = score * math.exp(-elapsed * ln2 / trap_half_life) + hits
rate = rate * math.exp(-elapsed * ln2 / rate_half_life) + requests

-- GCRA: each allowed request moves the theoretical arrival time one interval on; a request is
-- allowed while that stays within the burst of now.
local interval = 60 / per_minute
local window = burst * interval
if tat < now then
  tat = now
end
local room = math.floor((now + window - tat) / interval + 1e-9)
if room < 0 then
  room = 0
end
local allowed = math.min(requests, room)
tat = tat + allowed * interval
local limited
if requests > 0 then
  limited = allowed < requests
else
  limited = tat + interval - now > window + 1e-9
end

-- Stored with the digits they need (nine for a score or a rate, milliseconds for a time), not
-- Lua's fourteen: a spray of a million clients is a million of these hashes.
local function digits(x) return string.format('%.9g', x) end
local function time_of(x) return string.format('%.3f', x) end
redis.call('HSET', KEYS[1], 'hits', total_hits, 'score', digits(score), 'rate', digits(rate),
  'updated', time_of(now), 'tat', time_of(tat))
-- When the client was first seen matters to the admin views, which list trapped clients only.
if total_hits > 0 then
  redis.call('HSETNX', KEYS[1], 'first', time_of(now))
end
-- Replicas send the network of trapped clients only: the admin views list no other.
if ARGV[8] ~= '' then
  redis.call('HSET', KEYS[1], 'asn', ARGV[8], 'org', ARGV[9])
end
-- A trapped client (a burned pass among them) is kept for as long as a pass is valid.
if total_hits > 0 and kept_ms > idle_ms then
  idle_ms = kept_ms
end
redis.call('PEXPIRE', KEYS[1], idle_ms)
if total_hits > 0 then
  if ARGV[7] ~= '' then
    redis.call('SET', KEYS[2], ARGV[7], 'PX', idle_ms)
  else
    redis.call('PEXPIRE', KEYS[2], idle_ms)
  end
end

return { total_hits, tostring(score), tostring(rate), limited and 1 or 0 }
