-- lua/hydra/products.lua: the files a run adds to its folder when export.stages / export.format
-- ask (the folder of `hydra hydraize --out DIR`, ecosystem_2 §6.1). run.execute calls
--   products.write(dir, cfg, cache, { used = { {method, stage, key, path}... }, preds =
--                  { method = { set = path } }, methods = { name... }, log = fn })
-- before result.h5. With export.stages:
--   base.h5               the base model of the Hydra method (the import, or its fine-tuning)
--   gates.h5              the gates of its members ([M,L,H]; `hydra info`)
--   member_<m>.h5         member m (1-based), fine-tuned
--   fused.h5              the fused Hydra model
--   preds/<method>/<set>.h5   every method's predictions of every set (and of each member of
--                         a Hydra method: preds/<method>/member_<m>/<set>.h5)
--   result.md             the run's table (table.md) with a row for each member of each Hydra
--                         method, evaluated like the method (members/<method>_member_<m>.h5)
-- The Hydra method is each method named hydra_*; with several, their files get _<method>
-- (gates_hydra_circ.h5); a run without one links the first method's base as base.h5.
-- With export.format safetensors, export/ gets base.safetensors, member_<m>.safetensors
-- (dense-masked: stock timm / HF code loads them) and fused.safetensors + fused.name_map.json
-- (`hydra export`), each a stage "export" product.
-- Files are hard links into the stage cache (copies when it is on another file system), so a
-- run folder costs no space; a file left by an interrupted attempt is replaced.
local core = require("hydra.core")
local err = require("hydra.err")
local fs = require("hydra.fs")
local output = require("hydra.output")

local M = {}

-- dst becomes the file src: a hard link, else a copy (written beside dst, then renamed).
function M.link(src, dst)
  os.remove(dst)
  if os.execute(("ln -- %s %s 2>/dev/null"):format(fs.shell_quote(src), fs.shell_quote(dst))) then
    return
  end
  local tmp = output.temp_name(dst)
  local ok, why = pcall(function()
    local i = assert(io.open(src, "rb"))
    local o = assert(io.open(tmp, "wb"))
    while true do
      local chunk = i:read(1 << 20)
      if not chunk then break end
      assert(o:write(chunk))
    end
    i:close()
    assert(o:close())
  end)
  if not ok then
    os.remove(tmp)
    err.fail("run: cannot write '%s': %s", dst, err.message(why))
  end
  output.rename(tmp, dst, "run")
end

-- The stage records of each method: method -> { stage -> { record... } } (in order).
local function by_method(used)
  local out = {}
  for _, u in ipairs(used) do
    out[u.method] = out[u.method] or {}
    local t = out[u.method]
    t[u.stage] = t[u.stage] or {}
    table.insert(t[u.stage], u)
  end
  return out
end

local function base_record(recs)
  if recs.base then return recs.base[#recs.base] end
  return recs.import and recs.import[#recs.import] or nil
end

-- The export of a stage product (stage "export"): its path.
local function export_of(cache, rec, log, fused)
  return (cache:get("export", { stage = rec.stage, key = rec.key }, function(tmp, k)
    require("hydra.export").run({
      ckpt = rec.path, out = tmp,
      name_map = fused and cache:path("export", k, ".name_map.json") or nil,
      log = function(line) log("  export: %s", line) end,
    })
  end, { ext = ".safetensors" }))
end

-- Member m's predictions from a prediction file with /member_probs, written to dst.
local function member_preds(src, m, dst)
  local h5 = require("hydra.h5")
  local f <close> = h5.open(src)
  local o <close> = h5.create(dst)
  o:write("/probs", f:read("/member_probs"):row(m))
  o:write("/logits", f:read("/member_logits"):row(m))
  o:write("/labels", f:read("/labels"))
  o:commit()
end

-- result.md: the run's table (hydra.report) with a row for every member of each Hydra method
-- after the method's own: the member's predictions (preds/<method>/member_<m>/<set>.h5)
-- evaluated like the method (members/<method>_member_<m>.h5, a `hydra eval` result).
function M.result_md(dir, r, hydras)
  local eval, report, h5 = require("hydra.eval"), require("hydra.report"), require("hydra.h5")
  local is_hydra = {}
  for _, n in ipairs(hydras) do is_hydra[n] = true end
  local files = {}
  for _, name in ipairs(r.methods) do
    files[#files + 1] = dir .. "/methods/" .. name .. ".h5"
    local p = r.preds[name]
    local nm = 0
    if is_hydra[name] then
      local f <close> = h5.open(p.spec.id)
      nm = f:exists("/member_probs") and f:stat("/member_probs").shape[1] or 0
    end
    local set_of = {}
    for set, path in pairs(p.sets) do set_of[path] = set end
    for m = 1, nm do
      local mdir = ("%s/preds/%s/member_%d"):format(dir, name, m)
      output.mkdir_p(mdir, "run")
      local function conv(path, set)
        local d = mdir .. "/" .. (set or set_of[path]) .. ".h5"
        member_preds(path, m, d)
        return d
      end
      local spec = {}
      for k, v in pairs(p.spec) do spec[k] = v end
      spec.id = conv(p.spec.id)
      spec.ood, spec.shift = {}, {}
      for i, o in ipairs(p.spec.ood) do
        spec.ood[i] = { name = o.name, group = o.group, path = conv(o.path) }
      end
      for i, o in ipairs(p.spec.shift) do spec.shift[i] = { name = o.name, path = conv(o.path) } end
      if p.spec.calib then spec.calib = conv(p.spec.calib, "val") end
      spec.command = p.spec.command .. (", member %d"):format(m)
      local res = eval.evaluate(spec)
      res.method = ("%s member %d"):format(p.label, m)
      output.mkdir_p(dir .. "/members", "run")
      files[#files + 1] = ("%s/members/%s_member_%d.h5"):format(dir, name, m)
      eval.write(res, files[#files])
    end
  end
  report.write_text(dir .. "/result.md", report.markdown(files))
end

function M.write(dir, cfg, cache, r)
  local ex = cfg.export
  if not ex or (not ex.stages and ex.format ~= "safetensors") then return end
  local log = r.log
  local recs = by_method(r.used)
  local hydras = {}
  for _, name in ipairs(r.methods) do
    if name:match("^hydra_") and recs[name] and recs[name].fused then hydras[#hydras + 1] = name end
  end
  -- what to write: { file name (without extension), record, kind }
  local items = {}
  local function add(stem, rec, kind) if rec then items[#items + 1] = { stem, rec, kind } end end
  if #hydras == 0 then
    for _, name in ipairs(r.methods) do
      local b = recs[name] and base_record(recs[name])
      if b then add("base", b, "base"); break end
    end
  end
  for _, name in ipairs(hydras) do
    local sfx = #hydras > 1 and ("_" .. name) or ""
    local t = recs[name]
    add("base" .. sfx, base_record(t), "base")
    add("gates" .. sfx, t.gates and t.gates[#t.gates], "gates")
    for m, rec in ipairs(t.member or {}) do add(("member_%d%s"):format(m, sfx), rec, "member") end
    add("fused" .. sfx, t.fused[#t.fused], "fused")
  end
  if ex.stages then
    for _, it in ipairs(items) do M.link(it[2].path, dir .. "/" .. it[1] .. ".h5") end
    for _, name in ipairs(r.methods) do
      local pdir = dir .. "/preds/" .. name
      output.mkdir_p(pdir, "run")
      for set, path in pairs(r.preds[name].sets) do M.link(path, pdir .. "/" .. set .. ".h5") end
    end
    log("stage products linked into %s (base, gates, members, fused model, preds/)", dir)
    M.result_md(dir, r, hydras)
  end
  if ex.format == "safetensors" then
    output.mkdir_p(dir .. "/export", "run")
    for _, it in ipairs(items) do
      if it[3] ~= "gates" then
        local p = export_of(cache, it[2], log, it[3] == "fused")
        M.link(p, dir .. "/export/" .. it[1] .. ".safetensors")
        if it[3] == "fused" then
          M.link(cache:path("export", p:match("([^/]+)%.safetensors$"), ".name_map.json"),
            dir .. "/export/" .. it[1] .. ".name_map.json")
        end
      end
    end
    log("safetensors exports in %s/export", dir)
  end
end

return M
