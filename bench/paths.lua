-- wrk script: a fresh path for every request, as a crawler walking the trap would ask.
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", "/archive/2019/page-" .. counter, { ["Host"] = "example.org" })
end
