-- wrk script: browser page views as Caddy asks for them, spread over CLIENTS distinct client
-- addresses taken in turn (the first argument, default 16,384): client i is 10.a.b.c for
-- i = a·65536 + b·256 + c, so up to 16,777,216 of them. Each request is formatted as it is sent
-- (a million prepared requests would not fit wrk), so wrk spends a little more per request than
-- with bench/verdict.lua. Run with one thread (-t1): the counter is per thread.
local clients = 16384
local counter = 0

local headers = {
  ["Host"] = "127.0.0.1",
  ["X-Forwarded-Method"] = "GET",
  ["X-Forwarded-Proto"] = "https",
  ["X-Forwarded-Host"] = "site.example",
  ["User-Agent"] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36",
  ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
  ["Accept-Language"] = "en-US,en;q=0.9",
  ["Sec-Fetch-Site"] = "none",
  ["Sec-Fetch-Mode"] = "navigate",
  ["Sec-Fetch-Dest"] = "document",
  ["Cookie"] = "sid=abc123",
}

init = function(args)
  if args[1] then clients = tonumber(args[1]) end
end

request = function()
  local i = counter % clients
  counter = counter + 1
  headers["X-Forwarded-For"] = "10." .. (math.floor(i / 65536) % 256) .. "." ..
    (math.floor(i / 256) % 256) .. "." .. (i % 256)
  headers["X-Forwarded-Uri"] = "/articles/2024/post-" .. (counter % 1000)
  return wrk.format("GET", "/verdict", headers)
end
