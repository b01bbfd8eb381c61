-- wrk script: forward-auth requests from ever new client addresses (100.64.0.0/10, counted up
-- from 100.64.0.1), to fill the client records. Each wrk thread counts on its own, so run one.
local counter = 0
local limit = tonumber(os.getenv("PREFILL_CLIENTS") or "100000")

request = function()
  counter = counter % limit + 1
  local address = string.format("100.%d.%d.%d", 64 + math.floor(counter / 65536) % 64,
    math.floor(counter / 256) % 256, counter % 256)
  return wrk.format("GET", "/verdict", {
    ["Host"] = "127.0.0.1",
    ["X-Forwarded-Uri"] = "/page",
    ["X-Forwarded-For"] = address,
    ["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0",
  })
end
