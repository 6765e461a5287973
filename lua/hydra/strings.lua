-- lua/hydra/strings.lua: small string helpers (edit distance for "did you mean", formatting).
local M = {}

-- Levenshtein distance between a and b.
function M.distance(a, b)
  local la, lb = #a, #b
  if la == 0 then return lb end
  if lb == 0 then return la end
  local prev, cur = {}, {}
  for j = 0, lb do prev[j] = j end
  for i = 1, la do
    cur[0] = i
    local ca = a:byte(i)
    for j = 1, lb do
      local cost = (ca == b:byte(j)) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev, cur = cur, prev
  end
  return prev[lb]
end

-- The candidate closest to name, or nil when none is close enough to suggest.
function M.closest(name, candidates)
  local best, bestd = nil, math.huge
  for _, c in ipairs(candidates) do
    local d = M.distance(name, c)
    if d < bestd or (d == bestd and best and c < best) then best, bestd = c, d end
  end
  if best and bestd <= math.max(2, #name // 3) then return best end
  return nil
end

-- Text read from a file (an HDF5 attribute such as method, dataset, split) made safe to print
-- and to place in a plot label: every control character (bytes 0-31 and 127) becomes a space.
-- Non-strings pass through (nil stays nil).
function M.printable(s)
  if type(s) ~= "string" then return s end
  return (s:gsub("%c", " "))
end

-- s (a string, or any value through tostring) padded with spaces on the right to at least
-- width bytes: the table-column helper. string.format refuses field widths above 99
-- ("%-122s" is an error), so a width computed from data never goes into a format string.
function M.pad(s, width)
  s = tostring(s)
  if #s >= width then return s end
  return s .. (" "):rep(width - #s)
end

-- s with control characters written as \n, \r, \t or \ddd, for messages that quote a value.
function M.escape_controls(s)
  local names = { ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
  return (tostring(s):gsub("%c", function(c) return names[c] or ("\\%03d"):format(c:byte()) end))
end

return M
