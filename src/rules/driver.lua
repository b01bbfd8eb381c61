-- The rule driver (see driver.rs): runs every rule of a ruleset in one call from Rust.
local checks, reset = ...
local tostring, type, setmetatable, error = tostring, type, setmetatable, error
local count = #checks
local find, lower, sub = string.find, string.lower, string.sub

-- The request rules see: a table refilled for each request behind a read-only proxy.
local request = {}
-- The request's text fields arrive as one string (one copy into Lua, not one per field) and
-- are cut out of it here; its tail holds the headers as "\nname: value\n...", names lowercase.
local blob, headers_from = "", 1
-- "\nname: " search keys by the name a rule asked for, bounded so odd names cannot grow it.
local keys, key_count = {}, 0
-- Whether the request's source carried only some headers (a replayed log line): then the text
-- ends with the names of those it carried, "\0name\0...", and a rule that asks for any other
-- cannot be judged (see lua.rs, UNJUDGED).
local partial = false
local UNJUDGED = "unjudged: the input does not carry "
local function not_carried(name)
  error(UNJUDGED .. name, 0)
end
request.header = function(self, name)
  local key = keys[name]
  if key == nil then
    key = "\n" .. lower(name) .. ": "
    if key_count < 256 then keys[name] = key; key_count = key_count + 1 end
  end
  local start = find(blob, key, headers_from, true)
  if start == nil then
    if partial then
      local lowered = lower(tostring(name))
      if not find(blob, "\0" .. lowered .. "\0", headers_from, true) then not_carried(lowered) end
    end
    return nil
  end
  local first = start + #key
  return sub(blob, first, find(blob, "\n", first, true) - 1)
end
local view = setmetatable({}, {
  __index = request,
  __newindex = function() error("the request is read-only", 2) end,
  __metatable = false,
})

-- The verdicts a rule may return, as driver.rs numbers them ("deny" is an old name for "trap").
local CODES = { allow = 1, trap = 2, deny = 2, challenge = 3 }

local trace, current = nil, 0
local function run(first)
  for i = first, count do
    current = i
    local verdict, reason = checks[i](view)
    if verdict ~= nil then
      local code = CODES[verdict]
      if code == nil then
        error("returned \"" .. tostring(verdict) .. "\"; expected \"allow\", \"trap\", \"challenge\" or nil", 0)
      end
      if trace then trace[#trace + 1] = i; trace[#trace + 1] = verdict end
      if type(reason) ~= "string" then reason = nil end
      return i, code, reason
    end
    if trace then trace[#trace + 1] = i; trace[#trace + 1] = "pass" end
  end
  return 0, 0, nil
end

-- Fields the default rules rarely read are cut from the text on first use, then kept until the
-- next request clears them.
local ends, shown = {}, 0
-- The fields a request may lack, by their bit in `shown` (wire.rs, `shown`): a read of one the
-- request lacks is answered nil at once (a nil is never kept in `request`, so each read of it
-- comes back here).
local OPTIONAL = {
  claimed_crawler = 1, verified_crawler = 1, signed_agent = 2, robots_group = 4, crowdsec = 8,
  pass = 16, asn_org = 32, country = 64, crawler_check = 128,
}
-- The robots.txt and signature checks, by their numbers in `shown`.
local ROBOTS = { [0] = "none", "allowed", "disallowed" }
local SIGNATURES = { [0] = "unsigned", "verified", "invalid", "pending" }
-- Why a pass is burned, by wire.rs's `burn_code`.
local BURNS = { "trap_hits", "networks", "pages" }
-- How an owner's tool proved it (r.owner_tool), by its code in bits 58 and 59 of `packed`.
local OWNER_PROOFS = { "header", "address" }
-- The kind of AI crawler (r.ai_kind), by its code in bits 60 to 62 (AiKind::ALL's order).
local AI_KINDS = { "training", "ai-search", "assistant", "agent", "scraper" }
local function cut(from, to) return sub(blob, ends[from] + 1, ends[to]) end
local lazy = {
  method = function() return cut(0, 1) end,
  host = function() return cut(2, 3) end,
  uri = function() return cut(3, 5) end,
  query = function()
    local path_end, uri_end = ends[4], ends[5]
    return path_end < uri_end and sub(blob, path_end + 2, uri_end) or ""
  end,
  ip = function() return cut(6, 7) end,
  key = function() return cut(7, 8) end,
  asn_org = function() return cut(8, 9) end,
  country = function() return cut(9, 10) end,
  claimed_crawler = function() return cut(10, 11) end,
  crawler_check = function() return cut(11, 12) end,
  verified_crawler = function()
    local check = request.crawler_check
    if check == "ranges" or check == "reverse-dns" then return request.claimed_crawler end
  end,
  signed_agent = function() return cut(12, 13) end,
  robots_group = function() return cut(13, 14) end,
  crowdsec = function()
    local text = cut(14, 15)
    local first = find(text, "\31", 1, true)
    local second = find(text, "\31", first + 1, true)
    return { type = sub(text, 1, first - 1), scenario = sub(text, first + 1, second - 1),
             origin = sub(text, second + 1) }
  end,
  pass = function()
    local text = cut(15, 16)
    local fields, at = {}, 0
    for i = 1, 8 do
      local next_at = find(text, "\31", at + 1, true)
      fields[i] = sub(text, at + 1, next_at - 1)
      at = next_at
    end
    local burned = sub(text, at + 1)
    return { id = fields[1], earned = fields[2], age = tonumber(fields[3]), networks = tonumber(fields[4]),
             trap_hits = tonumber(fields[5]), trap_score = tonumber(fields[6]),
             request_rate = tonumber(fields[7]), rechallenge = fields[8] ~= "" and fields[8] or nil,
             burned = burned ~= "" and burned or nil }
  end,
  -- Only reached when the source did not carry the User-Agent (else it is set for each request).
  user_agent = function() not_carried("user-agent") end,
}
setmetatable(request, {
  __index = function(_, name)
    local bit = OPTIONAL[name]
    if bit ~= nil and (shown & bit) == 0 then return nil end
    local field = lazy[name]
    if field == nil then return nil end
    local value = field()
    request[name] = value
    return value
  end,
})

local function evaluate(tracing, text, proto, path, user_agent, method_end, proto_end, host_end,
                        path_end, uri_end, agent_end, ip_end, key_end, org_end, country_end,
                        crawler_end, check_end, signed_end, group_end, crowdsec_end, pass_end,
                        trap_hits, trap_score, request_rate, packed, optional)
  blob, headers_from = text, pass_end + 1
  ends[0], ends[1], ends[2], ends[3], ends[4], ends[5] = 0, method_end, proto_end, host_end, path_end, uri_end
  ends[6], ends[7], ends[8], ends[9], ends[10] = agent_end, ip_end, key_end, org_end, country_end
  ends[11], ends[12], ends[13], ends[14] = crawler_end, check_end, signed_end, group_end
  ends[15], ends[16] = crowdsec_end, pass_end
  shown = optional
  request.method, request.host, request.uri, request.query = nil, nil, nil, nil
  request.ip, request.key, request.asn_org, request.country = nil, nil, nil, nil
  request.claimed_crawler, request.crawler_check, request.verified_crawler = nil, nil, nil
  request.signed_agent, request.robots_group, request.crowdsec = nil, nil, nil
  request.pass = nil
  request.robots, request.signature_check = ROBOTS[(optional >> 8) & 3], SIGNATURES[(optional >> 10) & 3]
  partial = (packed & 32) ~= 0
  request.proto, request.path = proto, path
  if (packed & 64) == 0 then request.user_agent = user_agent else request.user_agent = nil end
  request.asn = (packed & 16) ~= 0 and (packed >> 7) & 0xffffffff or nil
  request.challenges = (packed >> 40) & 0xffff
  request.pass_burned = BURNS[(packed >> 56) & 3]
  request.trap_hits, request.trap_score, request.request_rate = trap_hits, trap_score, request_rate
  request.rate_limited = (packed & 1) ~= 0
  request.is_trap_url = (packed & 2) ~= 0
  request.dot_segments = (packed & 4) ~= 0
  request.owner_tool = OWNER_PROOFS[(packed >> 58) & 3]
  request.ai_kind = AI_KINDS[(packed >> 60) & 7]

  trace, current = tracing and {} or nil, 0
  reset()
  return run(1)
end

local function failed(message)
  if trace and current > 0 then trace[#trace + 1] = current; trace[#trace + 1] = "error: " .. message end
  return current
end

local function resume() return run(current + 1) end

local function last_trace() return trace end

return evaluate, failed, resume, last_trace
