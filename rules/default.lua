-- quagmire's default ruleset.
--
-- The script returns a list of rules. Rules run in order; the first one that returns "allow",
-- "trap" or "challenge" (followed by a reason) decides. A rule that returns nothing passes the
-- request on. A request that no rule decides is allowed. A challenge shows the client a page that
-- a browser answers by itself (a second of proof of work, or a few seconds' wait without
-- JavaScript) and that earns it a pass cookie; a program that does not answer is trapped.
--
-- `r` is the request, read-only: r.method, r.proto, r.host, r.uri, r.path, r.query,
-- r.user_agent, r.ip, r.key (the client key: address or IPv6 /64), r.asn, r.asn_org,
-- r.country, r.trap_hits, r.trap_score (decayed trap hits), r.request_rate, r.rate_limited,
-- r.is_trap_url, and r:header(name) for any header, case-insensitively.
-- r.trap_hits, r.request_rate and r.rate_limited are the address's (its IPv6 /64's): a request
-- with a good pass is not counted on them (its pass's own record counts it, in r.pass), so the
-- address's quota counts pass-less traffic only, and dozens of people holding passes behind one
-- VPN address never put it over.
-- r.uri and r.path are the path as the origin reads it: dot segments resolved (`/a/../b` is
-- `/b`, `%2e%2e` too), escapes of unreserved characters decoded, `%2F` and `\` read as `/`,
-- `;parameters` dropped and empty segments merged; r.dot_segments is true when the raw path had
-- a `.` or `..` segment, which browsers and HTTP libraries resolve before they send.
-- r.claimed_crawler is the known crawler the User-Agent names (lists/search-engines.txt or
-- lists/crawler-domains.txt), or nil; r.crawler_check says how the address bears it out:
-- "ranges" (in the published ranges), "reverse-dns" (forward-confirmed reverse DNS), "failed"
-- (neither), or "pending" (DNS has not answered yet: proves nothing); r.verified_crawler is the
-- crawler's name when proven, else nil.
-- r.robots is what the site's robots.txt (config: robots { }) says of this path for this user
-- agent: "allowed", "disallowed", or "none" (no robots.txt for the host); r.robots_group is the
-- group that applied (its product token as the file writes it, or "*"), or nil.
-- r.crowdsec is the CrowdSec decision in force for the client (config: crowdsec { }), or nil:
-- a table with type ("ban", "captcha", ...), scenario and origin.
-- r.signature_check is what checking a Web Bot Auth signature (RFC 9421, Signature-Agent) found:
-- "unsigned", "pending" (the agent's key directory is not fetched yet: proves nothing),
-- "invalid" or "verified"; r.signed_agent is the agent's host (such as "chatgpt.com") when
-- verified, else nil. Signing proves identity, not good behaviour: no rule here trusts it. To
-- let an agent you trust through, put a rule like this first:
--   { name = "signed-agents", check = function(r)
--       if r.signed_agent == "chatgpt.com" then return "allow", "signed by " .. r.signed_agent end
--     end },
--
-- r.pass is the valid pass the request carries (config: challenge { }), or nil: a table with id,
-- earned ("work" or "wait"), age (seconds), networks (IPv4 /24s and IPv6 /48s it was used from in
-- the burn window), trap_hits, trap_score and request_rate (its own, across every address it was
-- used from), rechallenge ("pace" when read faster than its page pace's burst, "budget" past its
-- day's pages, "crowd" when faster than its share of a crowded datacenter address or network:
-- ask again; nil otherwise), and burned (why it is burned: "trap_hits",
-- "networks" or "pages"; nil while good).
-- r.pass_burned is that same reason without building the table (nil without a pass or while good).
-- r.challenges is how many challenges the client was shown since it last answered one.
-- r.owner_tool is how the request proved it is one of the site owner's own tools (config:
-- owner-tools { }): "header" (it sent the owner's secret header) or "address" (it came from one
-- of the owner's addresses), else nil.
-- r.ai_kind is the kind of AI crawler the User-Agent names, by the section of
-- lists/ai-crawlers.txt its token is in: "training", "ai-search", "assistant", "agent" or
-- "scraper" (nil for anyone else, and for a listed token in no section).
--
-- Helpers: lists.<file name> for each list under rules/lists/ (ai-crawlers.txt is
-- lists.ai_crawlers); list:find(ua | ip | asn | path) returns the match or nil; for labelled network
-- lists, list:claimed(ua) returns the label the user agent names. browser(ua) returns the
-- family ("chrome", "edge", "firefox", "safari"), major and minor version a UA claims.
-- re.test(s, regex), re.find(s, regex [, init]) and re.match(s, regex) match regular expressions
-- (Rust regex syntax) in linear time; Lua patterns work only without quantifiers (* + - ?) and
-- %b, since their matching can take exponential time.
-- trap_threshold is the configured trap score threshold; challenge_unanswered and
-- challenge_everyone are challenge { unanswered } and challenge { everyone }; preferences is
-- what the site said of AI use (config: preferences { }): preferences.search,
-- preferences.ai_input and preferences.ai_train, each true, false, or nil when not stated.
--
-- Nothing a rule changes outlives its request: libraries and every table the rules can reach
-- (globals, captured locals, nested) are read-only, a rule may not assign a local declared
-- outside it, and globals a rule writes are forgotten before the next request.

-- A client whose decayed trap score reaches `trap_threshold` (config: rules { trap-threshold },
-- default 5) is trapped on every request. With the default half-life of ten minutes, one stray
-- hit (score 1) never reaches it; a crawler walking the trap reaches it within a few pages, and
-- stays over it for as long as it keeps walking.
local TRAP_SCORE_LIMIT = trap_threshold
-- The request rate (r.request_rate: about 1.44 times the requests of the last minute) past which
-- a monitor's page views are judged like anyone's: about ten page views a minute.
local MONITOR_RATE = 15
-- challenge { unanswered } and challenge { everyone }, read once (a local is cheaper than a global).
local UNANSWERED_LIMIT, CHALLENGE_EVERYONE = challenge_unanswered, challenge_everyone
-- The request rate past which an assistant's or agent's page fetches are no longer one person's
-- questions: about thirty pages a minute, the pace a pass reads at (challenge { page-pace }).
local READER_RATE = 45
-- Which preference decides each kind of AI crawler (config: preferences { }), with its name in
-- the config; scrapers have none, and are trapped whatever the site says.
local PREFERENCE_OF = {
  training = { preferences.ai_train, "ai-train" },
  ["ai-search"] = { preferences.search, "search" },
  assistant = { preferences.ai_input, "ai-input" },
  agent = { preferences.ai_input, "ai-input" },
}
-- Kinds that fetch for one person at a time, allowed at a reader's pace only.
local FOR_ONE_PERSON = { assistant = true, agent = true }

-- The lists and library functions the rules call, looked up once, here: a rule reads the
-- script's locals faster than a global table's fields (each of which the sandbox answers
-- through a read-only view), and every verdict runs these rules.
local ai_crawlers, ai_crawler_ranges = lists.ai_crawlers, lists.ai_crawler_ranges
local always_allowed_paths, program_paths = lists.always_allowed_paths, lists.program_paths
local datacenter_asns, http_libraries = lists.datacenter_asns, lists.http_libraries
local link_previews, web_archives, web_archive_asns = lists.link_previews, lists.web_archives, lists.web_archive_asns
local monitors = lists.monitors
local lower, format, find = string.lower, string.format, string.find
local re_test, re_match = re.test, re.match

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

-- Command-line tools people type by hand (lowercase tokens of lists/http-libraries.txt).
local TYPED_BY_PEOPLE = { curl = true, wget = true, httpie = true, powershell = true, windowspowershell = true }

-- What a page's path ends in: no extension (`/blog/post`, `/docs/`), or a page's own.
local PAGE_EXTENSIONS = {
  html = true, htm = true, xhtml = true, shtml = true, php = true, asp = true, aspx = true,
  jsp = true, cgi = true, pl = true,
}

local function accepts_html(r)
  local accept = r:header("accept")
  return accept ~= nil and find(accept, "text/html", 1, true) ~= nil
end

-- Whether a request without a pass asks for a page the way a reader's browser does, and so can
-- answer a challenge: browsers mark their page views (Sec-Fetch-Dest: document, or iframe and
-- frame for a framed page). A prefetch of a page is a view to come, and is one: a failed
-- prefetch costs a browser nothing, and without that a program marking every request as one
-- would never be asked. A fetch() for a page's HTML (Sec-Fetch-Dest: empty, Accept naming
-- text/html) is a program reading pages, not a page's own script. Without fetch metadata: over
-- http, where browsers send none, any GET (whatever its Accept); over https, a GET that accepts
-- HTML (older browsers; newer ones without metadata are lying-browser's).
local function asks_for_page(r)
  if r.method ~= "GET" then
    return false
  end
  local dest = r:header("sec-fetch-dest")
  if dest then
    dest = lower(dest)
    if dest == "document" or dest == "iframe" or dest == "frame" then
      return true
    end
    return dest == "empty" and accepts_html(r)
  end
  return r.proto ~= "https" or accepts_html(r)
end

-- Whether a request is for a page rather than a file (an image, a script, an archive, data) or a
-- feed asked for by its query (`/?feed=rss2` in WordPress, `?format=feed` in Joomla).
local function is_page(r)
  if re_test(r.query, [[(^|&)(feed=|format=(rss|atom|feed|xml))]]) then
    return false
  end
  local extension = re_match(r.path, [[\.([A-Za-z0-9]{1,10})$]])
  return extension == nil or PAGE_EXTENSIONS[lower(extension)] == true
end

return {
  {
    -- The site owner's own tools (config: owner-tools { }): a monitor or check that sent the
    -- owner's secret header, or came from the owner's addresses. They are the owner's, so they
    -- are let through on any path, whatever they look like: a trapped monitor reports the site
    -- as down.
    name = "owner-tools",
    check = function(r)
      local proof = r.owner_tool
      if proof then
        return "allow", "the site owner's tool (" .. proof .. ")"
      end
    end,
  },
  {
    -- Browsers, HTTP libraries and crawlers resolve `/../` (and `/%2e%2e/`) before they send a
    -- request; a raw path that still has one was written by hand to reach a page by a path the
    -- rules below would read differently (r.path is already resolved, so none of them can be
    -- walked around that way).
    name = "dot-segments",
    check = function(r)
      if r.dot_segments then
        return "trap", "dot segments in the raw path"
      end
    end,
  },
  {
    -- robots.txt tells crawlers what not to fetch, ACME challenges renew certificates, and feeds
    -- are for feed readers (which run on servers): these are allowed for everyone, even from
    -- datacenters. The paths are in lists/always-allowed-paths.txt; each entry's label is the
    -- reason.
    name = "always-allowed-paths",
    check = function(r)
      local reason = always_allowed_paths:find(r.path)
      if reason then
        return "allow", reason
      end
    end,
  },
  {
    -- Search engines' crawlers are allowed when the address proves the claim: it is in the
    -- operator's published ranges (lists/search-engines.txt), or its reverse DNS name is under
    -- the operator's domain and resolves back to it (lists/crawler-domains.txt). A claim DNS
    -- refuted is an impostor. While DNS has not answered (r.crawler_check == "pending") the claim
    -- proves nothing either way, so the rules below judge the request like any other.
    name = "search-engines",
    check = function(r)
      local claimed = r.claimed_crawler
      if claimed == nil then
        return
      end
      if r.verified_crawler then
        return "allow", "verified " .. claimed .. " (" .. r.crawler_check .. ")"
      end
      if r.crawler_check == "failed" then
        return "trap", "impostor claiming " .. claimed
      end
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
    -- A good pass outranks its address's score: the pass is the client (many people can share
    -- an address), and its own trap hits burn it (burned-pass, below).
    name = "trap-score",
    check = function(r)
      if r.trap_score >= TRAP_SCORE_LIMIT and r.pass == nil then
        return "trap", format("trap score %.1f", r.trap_score)
      end
    end,
  },
  {
    -- A pass follows its holder across addresses (config: challenge { }). One whose holders
    -- walked the trap, used it from more networks in an hour than one person's devices are on (a
    -- solved cookie shared across a proxy pool), or viewed pages faster than any reader is
    -- burned: whoever holds it is trapped, from any address, on every replica sharing the store.
    name = "burned-pass",
    check = function(r)
      local burned = r.pass_burned
      if burned then
        return "trap", "pass burned (" .. burned .. ")"
      end
    end,
  },
  {
    -- A pass read faster than its pace allows (a burst of tabs, a quick scroll through an index),
    -- past its day's budget, or faster than its share where a datacenter address's or network's
    -- pass holders together read more than people do, is a question, not a sentence: its holder is asked again, and
    -- reads on with the new pass once the browser has answered. Only page views are asked; the
    -- page's images and fetch() calls carry on.
    name = "pass-over-pace",
    check = function(r)
      local pass = r.pass
      if pass and pass.rechallenge and asks_for_page(r) and is_page(r) then
        return "challenge", "pass over its " .. pass.rechallenge
      end
    end,
  },
  {
    -- A browser answers a challenge by itself within seconds. A client shown one again and again
    -- without answering is a program reading the page rather than running it.
    name = "unanswered-challenges",
    check = function(r)
      if r.challenges >= UNANSWERED_LIMIT and r.pass == nil then
        return "trap", format("%d challenges unanswered", r.challenges)
      end
    end,
  },
  {
    -- A client under a CrowdSec decision (on its address or a range holding it, from the site's
    -- CrowdSec: config crowdsec { }): a ban is trapped, as the trap is the remediation (poison
    -- rather than a block page); a captcha is challenged until it holds a pass.
    name = "crowdsec",
    check = function(r)
      local decision = r.crowdsec
      if decision == nil then
        return
      end
      if decision.type == "captcha" then
        if r.pass == nil then
          return "challenge", format("CrowdSec captcha (%s)", decision.scenario)
        end
        return
      end
      return "trap", format("CrowdSec %s (%s)", decision.type, decision.scenario)
    end,
  },
  {
    -- Web archives (lists/web-archives.txt) crawling from their own networks
    -- (lists/web-archive-asns.txt) are allowed, however fast they crawl.
    name = "web-archives",
    check = function(r)
      local archive = web_archives:find(r.user_agent)
      if archive and r.asn and web_archive_asns:find(r.asn) then
        return "allow", format("web archive %s from AS%d", archive, r.asn)
      end
    end,
  },
  {
    -- Link-preview fetchers (lists/link-previews.txt) and archives from other networks read a
    -- page or a few when someone shares or saves a link: allowed while they are not rate-limited.
    -- One walking the site or the trap under such a name was stopped by the rules above, or is
    -- rate-limited, and gets no pass.
    name = "link-previews",
    check = function(r)
      if r.rate_limited then
        return
      end
      local fetcher = link_previews:find(r.user_agent)
      if fetcher then
        return "allow", "link preview by " .. fetcher
      end
      local archive = web_archives:find(r.user_agent)
      if archive then
        return "allow", "web archive " .. archive
      end
    end,
  },
  {
    -- Tools site owners point at their own sites (lists/monitors.txt): uptime monitors,
    -- synthetic checks (often a headless browser without fetch metadata), page-speed audits,
    -- validators, link checkers. A monitor asks for a page every few minutes, an audit loads one
    -- page and its files: allowed while the client is not rate-limited, its page views only at
    -- a monitor's rate. The names are forgeable, so a forger gets that rate and no more, never a
    -- trap URL (trap-url ran first); your own monitor gets through for certain with
    -- owner-tools { } (a secret header, or its addresses).
    name = "monitors",
    check = function(r)
      if r.rate_limited or (r.request_rate > MONITOR_RATE and is_page(r)) then
        return
      end
      local tool = monitors:find(r.user_agent)
      if tool then
        return "allow", "site monitor " .. tool
      end
    end,
  },
  {
    -- A crawler fetching a path the site's own robots.txt disallows for it ignores the site's
    -- rules: the strongest evidence there is, from any network. A crawler is a user agent the
    -- robots.txt names (r.robots_group), one on the AI-crawler list, or a claimed search engine
    -- (verified ones were allowed above); a browser under the `*` group reading a disallowed page
    -- is a person, not evidence. Without a robots.txt for the host, r.robots is "none".
    name = "ignored-robots-txt",
    check = function(r)
      if r.robots ~= "disallowed" then
        return
      end
      local library = http_libraries:find(r.user_agent)
      if library and TYPED_BY_PEOPLE[lower(library)] and not (r.asn and datacenter_asns:find(r.asn)) then
        -- curl and its kind from a home network: a person, whatever robots.txt says of curl.
        return
      end
      local group = r.robots_group
      local crawler = (group ~= "*" and group) or ai_crawlers:find(r.user_agent) or r.claimed_crawler
      if crawler then
        return "trap", "ignored robots.txt (" .. crawler .. ")"
      end
    end,
  },
  {
    -- An AI crawler the site's robots.txt names and allows on this path is allowed: the site's
    -- stated choice wins over the built-in list (a site that wants to appear in an AI search
    -- product says so there). Only a group naming it counts, not `*`; without a robots.txt the
    -- list decides. A claim to a crawler with published ranges from outside them is no claim, and
    -- one over the request quota gets no pass.
    name = "robots-txt-allows",
    check = function(r)
      local group = r.robots_group
      if r.robots ~= "allowed" or group == nil or group == "*" or r.rate_limited then
        return
      end
      -- The group must be the very crawler the AI list names: a User-Agent naming an allowed
      -- crawler first and a disallowed one after proves nothing.
      local token = ai_crawlers:find(r.user_agent)
      if token == nil or lower(token) ~= lower(group) then
        return
      end
      local ranged = ai_crawler_ranges:claimed(r.user_agent)
      if ranged and ai_crawler_ranges:find(r.ip) ~= ranged then
        return
      end
      return "allow", "robots.txt allows " .. group
    end,
  },
  {
    -- An AI crawler of a kind the site's preferences allow (config: preferences { }; the kinds
    -- are lists/ai-crawlers.txt's sections): training crawlers when ai-train is yes, AI search
    -- crawlers when search is yes, assistants and agents (a fetch for one person's question or
    -- task) when ai-input is yes, at a reader's pace. The site's robots.txt still wins (a group
    -- naming the crawler was read above), a claim from outside the crawler's published ranges
    -- is an impostor, and one over the request quota gets no pass. A kind the site said no to,
    -- or said nothing of, is trapped below, as are scrapers, whatever the site says.
    name = "ai-preferences",
    check = function(r)
      local kind = r.ai_kind
      local preference = kind and PREFERENCE_OF[kind]
      if preference == nil or preference[1] ~= true or r.rate_limited then
        return
      end
      local ranged = ai_crawler_ranges:claimed(r.user_agent)
      if ranged and ai_crawler_ranges:find(r.ip) ~= ranged then
        return "trap", "impostor claiming " .. ranged .. " (outside its published ranges)"
      end
      if FOR_ONE_PERSON[kind] and r.request_rate > READER_RATE and is_page(r) then
        return
      end
      return "allow", format("%s %s (the site says %s=yes)", kind, ai_crawlers:find(r.user_agent), preference[2])
    end,
  },
  {
    -- A datacenter or cloud address over its request quota (clients { requests-per-minute },
    -- r.rate_limited) is a crawler, however browser-like its requests: people browse from home,
    -- office and mobile networks. From those networks many people can share one address (carrier
    -- NAT, offices), so there the rate is only marked (r.rate_limited, and the
    -- quagmire_rate_limited_requests_total metric), never trapped by default.
    -- A request with a good pass is judged by its pass (its own pace, trap hits and networks),
    -- not by its address's quota, which counts pass-less traffic only.
    name = "datacenter-over-quota",
    check = function(r)
      if r.rate_limited and r.asn and r.pass == nil and datacenter_asns:find(r.asn) then
        return "trap", format("over the request quota from AS%d", r.asn)
      end
    end,
  },
  {
    -- AI crawlers and scrapers that say who they are, and headless browsers (ai-crawlers.txt,
    -- matched as whole tokens so that "BarcodeReader" is not "Code"), unless the site's
    -- preferences let their kind through (ai-preferences, above).
    name = "ai-crawlers",
    check = function(r)
      local token, kind = ai_crawlers:find(r.user_agent)
      if token == nil then
        return
      end
      local preference = kind and PREFERENCE_OF[kind]
      if preference == nil then
        return "trap", kind and format("user agent %s (%s)", token, kind) or "user agent " .. token
      end
      local said = preference[1]
      if said == nil then
        return "trap", format("user agent %s (%s; %s not stated)", token, kind, preference[2])
      elseif said == false then
        return "trap", format("user agent %s (%s; the site says %s=no)", token, kind, preference[2])
      end
      local over = r.rate_limited and "the request quota" or "a reader's pace"
      return "trap", format("user agent %s (%s, over %s)", token, kind, over)
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
        return "trap", format("claims %s %d without Sec-Fetch-*", family, major)
      end
    end,
  },
  {
    -- Generic HTTP libraries (lists/http-libraries.txt) from datacenter and cloud networks are
    -- scrapers, on any path but the site's declared program paths (lists/program-paths.txt: its
    -- APIs, empty until the site fills it in).
    name = "http-library-from-datacenter",
    check = function(r)
      local library = http_libraries:find(r.user_agent)
      if library and r.asn and datacenter_asns:find(r.asn) and not program_paths:find(r.path) then
        return "trap", format("%s from AS%d", library, r.asn)
      end
    end,
  },
  {
    -- A library asking for a page is a program wherever it runs: scrapers rent home and mobile
    -- addresses by the million precisely so that "from a home network" passes. curl, Wget and
    -- HTTPie stay allowed from home networks (people type them), and so does everything programs
    -- legitimately ask for: robots.txt, /.well-known/ and feeds (allowed above, for everyone),
    -- the site's program paths, and files that are not pages (images, archives, data).
    name = "http-library-page",
    check = function(r)
      local library = http_libraries:find(r.user_agent)
      if library == nil or TYPED_BY_PEOPLE[lower(library)] or program_paths:find(r.path) then
        return
      end
      if is_page(r) then
        return "trap", library .. " asking for a page"
      end
    end,
  },
  {
    -- Browser page views that cannot be told from a crawler driving a real browser are
    -- challenged, once: a person answers without noticing (a second's work, or a five-second
    -- wait without JavaScript) and reads on with a pass, whose pace and trap hits then follow
    -- them across addresses; a crawler pays for every pass, and is tracked and burned by it.
    -- Only browsers without a pass asking for a page (asks_for_page: views, prefetches, fetches
    -- for a page's HTML): subresources, a page's own fetch() calls, feeds, files and everything
    -- allowed above (robots.txt, /.well-known/, verified crawlers, link
    -- previews, archives) never are.
    -- Who, by default: from datacenter and cloud networks, where people are few (VPN users pay a
    -- second once) and crawlers driving real browsers live; from any network, a browser over the
    -- request quota (a person does not read 120 pages a minute; a crawler on rented home
    -- addresses does) or with a trap hit on its record (people never see trap links; one stray
    -- hit is not enough to trap, but enough to ask). With challenge { everyone #true }, every
    -- browser page view without a pass, for a site under attack.
    name = "challenge-browsers",
    check = function(r)
      if r.pass then
        return
      end
      -- Who first (cheap facts), then whether it is a browser's page view (headers, paths).
      local reason
      if CHALLENGE_EVERYONE then
        reason = "browser page view without a pass (challenge { everyone })"
      elseif r.asn and datacenter_asns:find(r.asn) then
        reason = format("browser page view from AS%d without a pass", r.asn)
      elseif r.rate_limited then
        reason = "browser over the request quota without a pass"
      elseif r.trap_score >= 1 then
        reason = format("browser with trap score %.1f without a pass", r.trap_score)
      else
        return
      end
      if asks_for_page(r) and is_page(r) and browser(r.user_agent) ~= nil then
        return "challenge", reason
      end
    end,
  },
}
