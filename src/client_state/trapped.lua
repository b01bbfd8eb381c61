-- The index of trapped clients that /api/trapped and the clients-over-threshold gauge read on
-- every replica (client_state/store.rs): a sorted set of client keys by the time of their last
-- trap hit, kept to the clients seen within the idle timeout and to at most `capacity` of them.
--
-- KEYS[1]  quagmire:trapped
-- ARGV     the client's key text, idle timeout (ms), capacity

local time = redis.call('TIME')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000
local idle = tonumber(ARGV[2]) / 1000
local capacity = tonumber(ARGV[3])

redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. tostring(now - idle))
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -capacity - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
