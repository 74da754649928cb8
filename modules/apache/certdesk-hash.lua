-- certdesk hash store for Apache httpd 2.4 (mod_lua; spec 4.35, docs/web-server-modules.md).
-- mod_proxy fetches GET <store>/<host name>; `check` is the output filter on that answer and
-- serves the hash only from a well-formed one. `not_found` is the ErrorDocument for a store that
-- is down, slow or not HTTP. Either way the client gets a plain 404, never the store's answer.

local MAX_BYTES = 4096 -- largest store answer accepted
local MAX_HASH = 512 -- a hash is 1-512 printable ASCII characters

-- Our answer replaces the store's: none of its headers reach the client.
local function plain(r, status)
  local names = {}
  for name in pairs(r:headers_out_table()) do names[#names + 1] = name end
  for _, name in ipairs(names) do r.headers_out[name] = nil end
  r.status = status
  r.content_type = "text/plain; charset=utf-8"
  r.headers_out["Cache-Control"] = "no-store"
  r.headers_out["X-Content-Type-Options"] = "nosniff"
end

-- The last line of a 2xx text/plain answer of at most MAX_BYTES, when it is a printable hash.
local function hash_of(status, content_type, body)
  if status < 200 or status > 299 or #body > MAX_BYTES then return nil end
  local ctype = string.lower(content_type or "")
  if ctype ~= "text/plain" and not ctype:match("^text/plain%s*;") then return nil end
  local text = body:gsub("\r?\n$", "", 1)
  local last = (text:match("([^\n]*)$") or ""):gsub("\r$", "", 1)
  if #last > MAX_HASH or not last:match("^[\32-\126]+$") or not last:match("[\33-\126]") then return nil end
  return last
end

-- Output filter (a coroutine): collects the store's answer, then replaces it. Nothing reaches
-- the client before the end, so the status can still be set.
function check(r)
  coroutine.yield()
  local parts, size = {}, 0
  while bucket ~= nil do
    size = size + #bucket
    if size <= MAX_BYTES then parts[#parts + 1] = bucket end
    coroutine.yield()
  end
  local hash = nil
  if size <= MAX_BYTES then hash = hash_of(r.status, r.content_type, table.concat(parts)) end
  if hash then
    plain(r, 200)
    coroutine.yield(hash .. "\n")
  else
    plain(r, 404)
    coroutine.yield("Not Found\n")
  end
end

-- ErrorDocument handler for the store's 5xx of mod_proxy (refused, timed out, not HTTP).
function not_found(r)
  plain(r, 404)
  r:puts("Not Found\n")
  return apache2.OK
end
