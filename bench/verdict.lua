-- wrk script: forward-auth requests as Caddy sends them for a browser page view, from a
-- rotating set of 16,384 client addresses (198.18.0.0/18, the benchmarking range) and 1,000
-- pages. So many clients keep each one at a person's pace (at 60,000 verdicts/s, 220 a minute,
-- under the default quota of 600 with a burst of 120), so the verdicts stay allowed: with 1,000
-- clients each would be over its quota, and a browser over it is challenged (issue 27). Requests
-- are prepared once, so that wrk itself spends little time per request. With a file of pass
-- cookies as its argument (wrk ... -- passes.txt, one per line), client i sends pass i with its
-- other cookie (bench/wrk-pass.sh).
local prepared = {}
local counter = 0
local CLIENTS = 16384

init = function(args)
  local passes = {}
  if args[1] then
    for line in io.lines(args[1]) do passes[#passes + 1] = line end
  end
  for i = 1, CLIENTS do
    local cookie = "sid=abc123"
    if #passes > 0 then cookie = cookie .. "; quagmire_pass=" .. passes[(i - 1) % #passes + 1] end
    local headers = {
      ["Host"] = "127.0.0.1",
      ["X-Forwarded-Method"] = "GET",
      ["X-Forwarded-Proto"] = "https",
      ["X-Forwarded-Host"] = "site.example",
      ["X-Forwarded-Uri"] = "/articles/2024/post-" .. (i % 1000),
      ["X-Forwarded-For"] = "198.18." .. math.floor((i - 1) / 256) .. "." .. ((i - 1) % 256),
      ["User-Agent"] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36",
      ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
      ["Accept-Language"] = "en-US,en;q=0.9",
      ["Accept-Encoding"] = "gzip",
      ["Sec-Fetch-Site"] = "none",
      ["Sec-Fetch-Mode"] = "navigate",
      ["Sec-Fetch-Dest"] = "document",
      ["Sec-Fetch-User"] = "?1",
      ["Sec-Ch-Ua"] = "\"Chromium\";v=\"130\", \"Not?A_Brand\";v=\"99\"",
      ["Upgrade-Insecure-Requests"] = "1",
      ["Cookie"] = cookie,
    }
    prepared[i] = wrk.format("GET", "/verdict", headers)
  end
end

request = function()
  counter = counter % CLIENTS + 1
  return prepared[counter]
end
