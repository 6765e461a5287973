-- lua/hydra/fs.lua: path and file helpers shared by the Lua modules (the one copy of each).
--   fs.dirname(path)      -> the folder part of path ("." when it has no '/'; "/x" -> "")
--   fs.join(dir, rel)     -> rel when it is absolute or dir is "." or ""; else dir .. "/" .. rel
--   fs.normalize(path)    -> path with "." parts and "x/.." pairs removed ("." when empty)
--   fs.read_file(path)    -> the whole file as a string, nil when it cannot be opened
--   fs.split_list(s)      -> the comma-separated names of s ("a,b" -> { "a", "b" }; nil -> {})
--   fs.shell_quote(s)     -> s as one single-quoted POSIX shell word (inert: no expansion)
local M = {}

function M.dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

function M.join(dir, rel)
  if rel:sub(1, 1) == "/" or dir == "." or dir == "" then return rel end
  return dir .. "/" .. rel
end

function M.normalize(path)
  local abs = path:sub(1, 1) == "/"
  local out = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." and #out > 0 and out[#out] ~= ".." then out[#out] = nil
    elseif part ~= "." then out[#out + 1] = part end
  end
  local s = table.concat(out, "/")
  if abs then return "/" .. s end
  return s ~= "" and s or "."
end

function M.read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

function M.split_list(s)
  local t = {}
  for name in (s or ""):gmatch("[^,]+") do t[#t + 1] = name end
  return t
end

function M.shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

return M
