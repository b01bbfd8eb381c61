-- One more challenge shown to a client (an address and a User-Agent), counted across every
-- replica (client_state/store.rs, Store::challenged). The count lives for its memory from the
-- first challenge (as each replica's own count), however many follow, and an answer on any
-- replica deletes it.
--
-- KEYS[1]  quagmire:{chal:<address>:<agent>}
-- ARGV     the count's memory (ms)
--
-- Returns the challenges shown since the client last answered, this one included.

local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
end
return count
