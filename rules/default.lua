-- quagmire's default ruleset.
--
-- The script returns a list of rules. Rules run in order; the first one that returns "allow" or
-- "trap" (followed by a reason) decides. A rule that returns nothing passes the request on. A
-- request that no rule decides is allowed.
--
-- `r` is the request, read-only: r.method, r.proto, r.host, r.uri, r.path, r.query,
-- r.user_agent, r.ip, r.key (the client key: address or IPv6 /64), r.asn, r.asn_org,
-- r.country, r.trap_hits, r.trap_score (decayed trap hits), r.request_rate, r.rate_limited,
-- r.is_trap_url, and r:header(name) for any header, case-insensitively.
--
-- Helpers: lists.<file name> for each list under rules/lists/ (ai-crawlers.txt is
-- lists.ai_crawlers); list:find(ua | ip | asn | path) returns the match or nil; for labelled network
-- lists, list:claimed(ua) returns the label the user agent names. browser(ua) returns the
-- family ("chrome", "edge", "firefox", "safari"), major and minor version a UA claims.
-- re.test(s, regex), re.find(s, regex [, init]) and re.match(s, regex) match regular expressions
-- (Rust regex syntax) in linear time; Lua patterns work only without quantifiers (* + - ?) and
-- %b, since their matching can take exponential time.
-- trap_threshold is the configured trap score threshold.
--
-- Nothing a rule changes outlives its request: libraries and the tables this script leaves in
-- globals are read-only, and globals a rule writes are forgotten before the next request.

-- A client whose decayed trap score reaches `trap_threshold` (config: rules { trap-threshold },
-- default 5) is trapped on every request. With the default half-life of ten minutes, one stray
-- hit (score 1) never reaches it; a crawler walking the trap reaches it within a few pages, and
-- stays over it for as long as it keeps walking.
local TRAP_SCORE_LIMIT = trap_threshold

-- Browsers that always send Sec-Fetch-* headers to secure origins, from this version on.
local function sends_fetch_metadata(family, major, minor)
  if family == "chrome" or family == "edge" then
    return major >= 80
  elseif family == "firefox" then
    return major >= 90
  elseif family == "safari" then
    return major > 16 or (major == 16 and minor >= 4)
  end
  return false
end

return {
  {
    -- robots.txt tells crawlers what not to fetch, ACME challenges renew certificates, and feeds
    -- are for feed readers (which run on servers): these are allowed for everyone, even from
    -- datacenters. The paths are in lists/always-allowed-paths.txt; each entry's label is the
    -- reason.
    name = "always-allowed-paths",
    check = function(r)
      local reason = lists.always_allowed_paths:find(r.path)
      if reason then
        return "allow", reason
      end
    end,
  },
  {
    -- Search engines whose crawlers come from their published ranges are allowed; a client that
    -- claims to be one from anywhere else is an impostor.
    name = "search-engines",
    check = function(r)
      local claimed = lists.search_engines:claimed(r.user_agent)
      if claimed == nil then
        return
      end
      if lists.search_engines:find(r.ip) == claimed then
        return "allow", "verified " .. claimed
      end
      return "trap", "impostor claiming " .. claimed
    end,
  },
  {
    -- No human ever sees a trap URL, so asking for one is proof enough, from any address.
    name = "trap-url",
    check = function(r)
      if r.is_trap_url then
        return "trap", "asked for a trap URL"
      end
    end,
  },
  {
    -- A client that recently walked the trap keeps getting it, including its IPv6 /64 neighbours.
    name = "trap-score",
    check = function(r)
      if r.trap_score >= TRAP_SCORE_LIMIT then
        return "trap", string.format("trap score %.1f", r.trap_score)
      end
    end,
  },
  {
    -- AI crawlers and scrapers that say who they are, and headless browsers (ai-crawlers.txt,
    -- matched as whole tokens so that "BarcodeReader" is not "Code").
    name = "ai-crawlers",
    check = function(r)
      local token = lists.ai_crawlers:find(r.user_agent)
      if token then
        return "trap", "user agent " .. token
      end
    end,
  },
  {
    -- Every browser and every honest client sends a User-Agent.
    name = "no-user-agent",
    check = function(r)
      if r.user_agent == "" then
        return "trap", "no user agent"
      end
    end,
  },
  {
    -- A UA claiming a browser version that always sends Sec-Fetch-* over HTTPS, on an HTTPS request
    -- without them, is lying. Over plain HTTP browsers send none, so that is no evidence.
    name = "lying-browser",
    check = function(r)
      if r.proto ~= "https" or r:header("sec-fetch-mode") ~= nil then
        return
      end
      local family, major, minor = browser(r.user_agent)
      if family and sends_fetch_metadata(family, major, minor) then
        return "trap", string.format("claims %s %d without Sec-Fetch-*", family, major)
      end
    end,
  },
  {
    -- Generic HTTP libraries from datacenter and cloud networks are scrapers; from home and office
    -- networks they are more often scripts people run, so they pass.
    name = "http-library-from-datacenter",
    check = function(r)
      local library = lists.http_libraries:find(r.user_agent)
      if library and r.asn and lists.datacenter_asns:find(r.asn) then
        return "trap", string.format("%s from AS%d", library, r.asn)
      end
    end,
  },
}
