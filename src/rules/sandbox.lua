-- The environment rule scripts run in. Loaded once per Lua state, before the script, as
-- "=quagmire sandbox"; see src/rules/lua.rs.
--
-- What a rule changes does not outlive its request:
-- - the libraries (string, table, math, utf8) and `lists` are read-only views; the string
--   metatable is hidden;
-- - every table the rules can reach (in the script's globals, in its locals the rules capture,
--   nested, metatables included) is made read-only in place by `seal`, and lua.rs refuses a
--   script whose rules assign a local declared outside them;
-- - a global a rule writes is forgotten by `reset` before the next request, over the globals the
--   script defined while loading.
--
-- Lua patterns whose matching can backtrack (quantifiers, %b) are refused by `check_pattern`:
-- their time in C cannot be limited. `re` offers linear-time regular expressions instead.
local check_pattern, re, lists, browser, trap_threshold, challenge_everyone, challenge_unanswered, preferences = ...

local setmetatable, getmetatable, rawget, rawset, rawlen, error, next, type =
  setmetatable, getmetatable, rawget, rawset, rawlen, error, next, type
local find, match, gmatch, gsub = string.find, string.match, string.gmatch, string.gsub

local function read_only()
  error("rules cannot change this table: changes would outlive the request", 2)
end

-- Read-only views, by the table they show. A view's own table is reachable only through it.
local views, is_view = {}, {}
local function freeze(t)
  if type(t) ~= "table" or is_view[t] then return t end
  local view = views[t]
  if view then return view end
  view = {}
  views[t], is_view[view] = view, true
  for key, value in next, t do
    if type(value) == "table" then t[key] = freeze(value) end
  end
  local function step(_, key) return next(t, key) end
  setmetatable(view, {
    __index = t,
    __newindex = read_only,
    __len = function() return #t end,
    __pairs = function() return step, view, nil end,
    __metatable = false,
  })
  return view
end

local strings = {}
for name, f in next, string do strings[name] = f end
strings.dump = nil
strings.find = function(s, pattern, init, plain)
  if not plain then check_pattern(pattern) end
  return find(s, pattern, init, plain)
end
strings.match = function(s, pattern, init) check_pattern(pattern); return match(s, pattern, init) end
strings.gmatch = function(s, pattern, init) check_pattern(pattern); return gmatch(s, pattern, init) end
strings.gsub = function(s, pattern, replacement, n)
  check_pattern(pattern)
  return gsub(s, pattern, replacement, n)
end
-- ("text"):find(...) goes through the string metatable: the same guarded functions, and the
-- metatable itself out of reach.
local string_metatable = getmetatable("")
string_metatable.__index = strings
string_metatable.__metatable = false

-- Sealed metatables (see `seal`) and the private copies objects made with them use.
local private = setmetatable({}, { __mode = "k" })

local base = {
  assert = assert, error = error, getmetatable = getmetatable, ipairs = ipairs, next = next,
  pairs = pairs, pcall = pcall, rawequal = rawequal, rawget = rawget, rawlen = rawlen,
  select = select, tonumber = tonumber, tostring = tostring, type = type, _VERSION = _VERSION,
  -- A finalizer runs whenever Lua collects, even when the state closes, outside any
  -- evaluation's time limit.
  setmetatable = function(t, metatable)
    if metatable ~= nil and rawget(metatable, "__gc") ~= nil then
      error("rules cannot set __gc metamethods", 2)
    end
    -- A metatable the script made while loading is sealed; objects a rule makes with it get
    -- the metatable's private working copy (see `seal`).
    return setmetatable(t, private[metatable] or metatable)
  end,
  string = freeze(strings), table = freeze(table), math = freeze(math), utf8 = freeze(utf8),
  lists = freeze(lists), re = freeze(re), browser = browser, trap_threshold = trap_threshold,
  challenge_everyone = challenge_everyone, challenge_unanswered = challenge_unanswered,
  preferences = freeze(preferences),
}

-- A global a script writes lands in env itself (which __newindex sees, since env holds no key
-- until then); a read looks in env, then in loaded: the script's load-time globals, over base
-- while the script loads and over a copy of base after. Rules read globals far more often than they write them: a read is one step, a write a
-- call.
local loaded = setmetatable({}, { __index = base })
local env = setmetatable({}, {
  __index = loaded,
  __newindex = function(t, key, value) rawset(t, key, value) end,
  __metatable = false,
})
base._G = env

-- Before each request: forget the globals the last one wrote.
local function reset()
  if next(env) ~= nil then
    for key in next, env do env[key] = nil end
  end
end

-- After the script ran: what it left in globals becomes the loaded layer (made read-only in place
-- by `seal`, with everything else the rules can reach). Returns those globals.
local function settle()
  local globals = {}
  for key, value in next, env do loaded[key] = value; globals[key] = value end
  for key, value in next, base do
    if rawget(loaded, key) == nil then loaded[key] = value end
  end
  setmetatable(loaded, nil)
  reset()
  return globals
end

-- A metatable's contents as an object may use them: finalizers never (they would run when the
-- state closes, outside any time limit).
local function copy_metatable(metatable)
  local copy = {}
  for key, value in next, metatable do
    if key ~= "__gc" and key ~= "__close" then copy[key] = value end
  end
  return copy
end

-- Makes table `t` read-only in place, so that every reference to it (a local a rule captured,
-- a field of another table) sees the same read-only table: its entries move to a hidden table
-- that reads fall through to and nothing outside reaches (`pairs` walks it through a function
-- of its own), so every write meets __newindex. `own` is the metatable the script gave `t`:
-- its metamethods keep working (its __index answers what the table lacks, through a guarded
-- copy that refuses writes), and getmetatable still returns it.
local function seal_table(t, own, for_objects, for_hidden, set_metatable)
  local hidden = {}
  for key, value in next, t do hidden[key] = value end
  for key in next, hidden do rawset(t, key, nil) end
  local sealed = {}
  local working = own ~= nil and for_objects[own] or nil
  if working ~= nil then
    for key, value in next, working do sealed[key] = value end
    set_metatable(hidden, for_hidden[own])
  end
  local function step(_, key) return next(hidden, key) end
  sealed.__index = hidden
  sealed.__newindex = read_only
  sealed.__len = (working ~= nil and rawget(working, "__len")) or function() return rawlen(hidden) end
  sealed.__pairs = function(self) return step, self, nil end
  sealed.__metatable = working ~= nil and working.__metatable or false
  set_metatable(t, sealed)
end

-- After the script ran and its rules were collected: seals every table the rules can reach from
-- `roots` (the returned rules and the script's globals), through tables' keys, values and
-- metatables and Lua functions' upvalues, and returns the Lua functions it met (whose bytecode
-- lua.rs checks for assignments to outer locals). The sandbox's own read-only views and the
-- globals table are left as they are.
--
-- A table used as a metatable is sealed like any other, so a rule cannot change it; the objects
-- that use it, and those a rule makes with `setmetatable` during a request, use a private copy
-- made before sealing, which nothing but those objects reaches. A metatable with a finalizer
-- (`__gc`, which the sandbox's setmetatable refuses, but which a script can add to a metatable
-- afterwards) makes the script fail to load.
local function seal(roots, upvalue, metatable, set_metatable)
  local seen, functions, tables, metatables = { [env] = true }, {}, {}, {}
  local function walk(value)
    local kind = type(value)
    if (kind ~= "table" and kind ~= "function") or seen[value] or is_view[value] then return end
    seen[value] = true
    if kind == "function" then
      functions[#functions + 1] = value
      local index = 1
      while true do
        local name, captured = upvalue(value, index)
        if name == nil then break end
        walk(captured)
        index = index + 1
      end
      return
    end
    tables[#tables + 1] = value
    for key, item in next, value do
      walk(key)
      walk(item)
    end
    local own = metatable(value)
    if own ~= nil and not is_view[own] then
      if rawget(own, "__gc") ~= nil then error("rules cannot set __gc metamethods", 0) end
      metatables[own] = true
      walk(own)
    end
  end
  walk(roots)
  -- Before anything is sealed: each metatable's contents, for the objects that use it (with
  -- getmetatable returning the sealed original), and a copy that refuses writes, for the
  -- hidden tables of sealed ones (an __index function gets the hidden table as `self`).
  local for_objects, for_hidden = {}, {}
  for own in next, metatables do
    local working = copy_metatable(own)
    if rawget(working, "__metatable") == nil then working.__metatable = own end
    local guarded = copy_metatable(working)
    guarded.__newindex = read_only
    for_objects[own], for_hidden[own] = working, guarded
  end
  for i = 1, #tables do
    local t = tables[i]
    if t ~= roots then seal_table(t, metatable(t), for_objects, for_hidden, set_metatable) end
  end
  for own, working in next, for_objects do private[own] = working end
  return functions
end

return env, settle, reset, seal, base
