-- wrk script: what a site's proxy actually sends. 2,000 clients, each a page view followed by 10
-- to 30 subresource verdicts (images, scripts, styles: the same client and User-Agent, as a
-- browser loads a page), and 5% of the clients bots (GPTBot, python-requests, a headless
-- browser) asking for pages only. The requests are prepared once and sent in this order, round
-- and round; the seed is fixed, so every run sends the same mix.
local prepared = {}
local counter = 0

local CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36"
local BOTS = {
  "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
  "python-requests/2.31.0",
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36",
}
local KINDS = { { "image", ".jpg" }, { "script", ".js" }, { "style", ".css" }, { "font", ".woff2" } }

local function forward_auth(client, uri, agent, dest)
  local headers = {
    ["Host"] = "127.0.0.1",
    ["X-Forwarded-Method"] = "GET",
    ["X-Forwarded-Proto"] = "https",
    ["X-Forwarded-Host"] = "site.example",
    ["X-Forwarded-Uri"] = uri,
    ["X-Forwarded-For"] = client,
    ["User-Agent"] = agent,
    ["Accept-Language"] = "en-US,en;q=0.9",
    ["Accept-Encoding"] = "gzip",
  }
  if agent == CHROME then
    headers["Sec-Fetch-Site"] = dest == "document" and "none" or "same-origin"
    headers["Sec-Fetch-Mode"] = dest == "document" and "navigate" or "no-cors"
    headers["Sec-Fetch-Dest"] = dest
    headers["Accept"] = dest == "document" and "text/html,application/xhtml+xml" or "*/*"
  else
    headers["Accept"] = "*/*"
  end
  return wrk.format("GET", "/verdict", headers)
end

init = function(args)
  math.randomseed(20261206)
  for i = 1, 2000 do
    local client = "198.51." .. math.floor(i / 250) .. "." .. (i % 250 + 1)
    if i % 20 == 0 then
      local agent = BOTS[(i / 20) % #BOTS + 1]
      for page = 1, 5 do
        prepared[#prepared + 1] = forward_auth(client, "/articles/" .. i .. "/" .. page, agent, "document")
      end
    else
      prepared[#prepared + 1] = forward_auth(client, "/articles/" .. i, CHROME, "document")
      for r = 1, math.random(10, 30) do
        local kind = KINDS[(r % #KINDS) + 1]
        prepared[#prepared + 1] = forward_auth(client, "/assets/" .. i .. "-" .. r .. kind[2], CHROME, kind[1])
      end
    end
  end
end

request = function()
  counter = counter % #prepared + 1
  return prepared[counter]
end
