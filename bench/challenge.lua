-- wrk script: the challenge page for browser page views, as nginx's error_page asks quagmire's
-- /challenge for it, from a rotating set of client addresses and pages.
local prepared = {}
local counter = 0

init = function(args)
  for i = 1, 1000 do
    prepared[i] = wrk.format("GET", "/challenge", {
      ["Host"] = "127.0.0.1",
      ["X-Original-URI"] = "/articles/2024/post-" .. i,
      ["X-Forwarded-Proto"] = "https",
      ["X-Forwarded-Host"] = "site.example",
      ["X-Forwarded-For"] = "198.51." .. (i % 200) .. "." .. (i % 250 + 1),
      ["User-Agent"] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36",
      ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    })
  end
end

request = function()
  counter = counter % 1000 + 1
  return prepared[counter]
end
