-- quagmire forward auth for HAProxy (2.5 or later, built with Lua), using HAProxy's own
-- httpclient: no extra Lua libraries.
--
-- The action `lua.quagmire` asks quagmire's /verdict about the request, sending the client's
-- headers (never its body) plus the X-Forwarded-* headers, and leaves the answer in variables:
--   txn.quagmire_status    the verdict's HTTP status (599 when quagmire cannot be reached)
--   txn.quagmire_verdict   X-Quagmire-Verdict ("allow", "trap" or "challenge")
--   txn.quagmire_rule      X-Quagmire-Rule (the deciding rule)
--   txn.quagmire_location  Location (redirect mode)
--   txn.quagmire_body      the challenge page, for a challenge verdict (401), with
--   txn.quagmire_csp       its Content-Security-Policy
-- The verdict address comes from the environment variable QUAGMIRE_VERDICT_URL, which the
-- haproxy.cfg examples set with `setenv` in their global section.

local verdict_url = os.getenv("QUAGMIRE_VERDICT_URL") or "http://127.0.0.1:8420/verdict"

-- Headers not passed on: hop-by-hop and body framing, and the client's own address claims
-- (HAProxy states the address itself below).
local skipped = {
  ["content-length"] = true, ["transfer-encoding"] = true, ["connection"] = true,
  ["keep-alive"] = true, ["te"] = true, ["upgrade"] = true, ["expect"] = true,
  ["x-forwarded-for"] = true, ["x-real-ip"] = true, ["forwarded"] = true,
}

local function first(values)
  if values == nil then return nil end
  return values[0] or values[1]
end

core.register_action("quagmire", { "http-req" }, function(txn)
  local headers = {}
  for name, values in pairs(txn.http:req_get_headers()) do
    if not skipped[name] then
      local list = {}
      for i = 0, 63 do
        if values[i] ~= nil then list[#list + 1] = values[i] end
      end
      headers[name] = list
    end
  end
  headers["x-forwarded-method"] = { txn.sf:method() }
  headers["x-forwarded-uri"] = { txn.sf:pathq() }
  headers["x-forwarded-host"] = { txn.sf:req_hdr("host") or "" }
  headers["x-forwarded-proto"] = { txn.sf:ssl_fc() == 1 and "https" or "http" }
  headers["x-forwarded-for"] = { txn.sf:src() }

  local client = core.httpclient()
  local ok, response = pcall(function()
    return client:get({ url = verdict_url, headers = headers, timeout = 2000 })
  end)
  if not ok or response == nil or response.status == nil or response.status == 0 then
    txn:set_var("txn.quagmire_status", 599)
    return
  end
  txn:set_var("txn.quagmire_status", response.status)
  local answer = response.headers or {}
  txn:set_var("txn.quagmire_verdict", first(answer["x-quagmire-verdict"]) or "")
  txn:set_var("txn.quagmire_rule", first(answer["x-quagmire-rule"]) or "")
  txn:set_var("txn.quagmire_location", first(answer["location"]) or "")
  if response.status == 401 then
    txn:set_var("txn.quagmire_body", response.body or "")
    txn:set_var("txn.quagmire_csp", first(answer["content-security-policy"]) or "default-src 'none'")
  end
end, 0)
