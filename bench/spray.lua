-- wrk script: browser-like forward-auth requests, each from a client address never used before
-- (10.0.0.1, 10.0.0.2, ...), to measure what a spray of clients costs. Run with one thread (-t1):
-- the counter is per thread.
local counter = 0

local headers = {
  ["Host"] = "127.0.0.1",
  ["X-Forwarded-Method"] = "GET",
  ["X-Forwarded-Proto"] = "https",
  ["X-Forwarded-Host"] = "site.example",
  ["X-Forwarded-Uri"] = "/",
  ["User-Agent"] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36",
  ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
  ["Accept-Language"] = "en-US,en;q=0.9",
  ["Sec-Fetch-Site"] = "none",
  ["Sec-Fetch-Mode"] = "navigate",
  ["Sec-Fetch-Dest"] = "document",
}

request = function()
  counter = counter + 1
  headers["X-Forwarded-For"] = "10." .. (math.floor(counter / 65536) % 256) .. "." ..
    (math.floor(counter / 256) % 256) .. "." .. (counter % 256)
  return wrk.format("GET", "/verdict", headers)
end
