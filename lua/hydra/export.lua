-- lua/hydra/export.lua: hydra checkpoints to safetensors under timm or Hugging Face names
-- (DESIGN §9; the `hydra export` command, lua/hydra/cli/export.lua).
--
--   local ex = require("hydra.export")
--   ex.run({ ckpt = "member_0.h5", names = "timm" | "hf", slice = false, out = "m.safetensors",
--            dtype = "f32" | "f16" | "bf16", log = print }) -> { format =, kind = "model" | "member", heads = {{...}, ...} }
--
-- The name maps are import's (lua/hydra/import.lua M.maps) read backwards: hydra's fused
-- attn.qkv is split into HF's query/key/value. A member (a checkpoint whose /head_gates are not
-- all 1) is written
--   dense-masked (default): every tensor in its original shape; the columns of a head's output
--     projection (attn.proj.weight, HF attention.output.dense.weight) multiplied by its gate, so
--     a pruned head (gate 0) contributes exactly nothing -- stock timm / HF code loads the file
--     and computes hydra's gated logits;
--   sliced (slice = true; gates must be 0 or 1): a pruned head's q/k/v rows and proj columns
--     removed, so layer l's qkv is [3*k_l*hd, D] and proj [D, k_l*hd] (k_l = 0 allowed); the
--     head counts are in __metadata__ (HF's removed prune_heads is not relied on).
-- __metadata__ (strings): format "pt"; hydra.version; hydra.source (the origin: /import origin
-- of an imported checkpoint, else the checkpoint's sha256); hydra.kind ("model" | "member");
-- hydra.names (timm-vit | hf-vit | hf-bert); hydra.heads (JSON: kept heads per layer, 0-based);
-- hydra.head_dim; hydra.n_heads; hydra.ln_eps ("%.17g"); hydra.act; hydra.sliced ("0" | "1");
-- hydra.head_counts (JSON, sliced only). The same checkpoint always gives the same bytes, and
-- `hydra import` of an export restores the checkpoint bit-exactly (its gates from hydra.heads).
local core = require("hydra.core")
local err = require("hydra.err")
local import = require("hydra.import")

local M = {}

-- The format of `names` for a model of kind `kind`.
local function format_of(who, names, kind)
  if kind == "vit" then
    if names == "timm" then return "timm-vit" end
    if names == "hf" then return "hf-vit" end
  else
    if names == "hf" then return "hf-bert" end
    if names == "timm" then
      err.usage("%s: timm names exist for ViTs only; a text model exports with --names hf", who)
    end
  end
  err.usage("%s: --names must be timm or hf (got '%s')", who, tostring(names))
end

-- Column (or row) ranges of the heads in `list` (0-based head indices) within a D-wide block
-- starting at base.
local function head_ranges(list, hd, base)
  local r = {}
  for _, h in ipairs(list) do r[#r + 1] = { base + h * hd, base + h * hd + hd } end
  return r
end

-- The file dtype of --dtype f32 (default) | f16 | bf16 (round to nearest even).
function M.dtype(who, d)
  local t = { f32 = "F32", f16 = "F16", bf16 = "BF16" }
  if d == nil then return "F32" end
  if not t[d] then err.usage("%s: --dtype must be f32, f16 or bf16 (got '%s')", who, tostring(d)) end
  return t[d]
end

-- The shortest of %.15g / %.17g that reads back as x (1e-06, not 9.9999999999999995e-07).
function M.num_str(x)
  local s = ("%.15g"):format(x)
  if tonumber(s) == x then return s end
  return ("%.17g"):format(x)
end

function M.run(opts)
  local who = "hydra export"
  local h5 = require("hydra.h5")
  local ckpt = opts.ckpt
  local f <close> = err.wrap(who, h5.open, ckpt)
  if f:exists("/members") and f:exists("/fuse") then return M.fused(opts, f) end
  local imp = f:exists("/import") and f:attrs("/import") or {}
  local m = err.wrap(who, core.model_load, ckpt)
  if m:ensemble() then
    err.fail("%s: '%s' is a %s model; only single models and pruned members export", who, ckpt,
      m:ensemble().method)
  end
  local c = m:config()
  local names = opts.names
  if not names then
    names = (imp.format == "hf-vit" or imp.format == "hf-bert") and "hf" or "timm"
    if c.kind == "text" and not imp.format then names = "hf" end
  end
  local fmt = format_of(who, names, c.kind)
  if not import.maps[fmt] then err.fail("%s: --names %s is not available in this build", who, names) end
  local L, H, D = c.depth, c.n_heads, c.d_model
  local hd = D // H
  local g = m:gates():totable()
  local kept, pruned, member, counts = {}, {}, false, {}
  for l = 1, L do
    kept[l], pruned[l] = {}, {}
    for h = 1, H do
      local v = g[l][h]
      if v ~= 1 then member = true end
      if v ~= 0 then kept[l][#kept[l] + 1] = h - 1 end
      if v ~= 1 then pruned[l][#pruned[l] + 1] = { h - 1, v } end
      if opts.slice and v ~= 0 and v ~= 1 then
        err.fail("%s: '%s': --slice needs gates 0 or 1 (layer %d head %d has %g); the "
          .. "dense-masked export (no --slice) scales the head instead", who, ckpt, l, h, v)
      end
    end
    counts[l] = #kept[l]
  end
  local slice = opts.slice and member

  local entries = {}
  local has = {}
  for _, n in ipairs(m:param_names()) do has[n] = true end
  for _, r in ipairs(import.expand(import.maps[fmt], L)) do
    local src, dst, tr = r[1], r[2], r[3]
    if r.opt and not has[dst] then goto continue end
    local t = m:param(dst)
    local l = tonumber(dst:match("^blocks%.(%d+)%."))
    if l and dst:match("attn%.proj%.weight$") then
      if slice then
        t = core.tensor_select(t, 2, head_ranges(kept[l + 1], hd, 0))
      elseif #pruned[l + 1] > 0 then
        local ranges, factors = {}, {}
        for _, p in ipairs(pruned[l + 1]) do
          ranges[#ranges + 1] = { p[1] * hd, p[1] * hd + hd }
          factors[#factors + 1] = p[2]
        end
        t = core.tensor_scale_ranges(t, 2, ranges, factors)
      end
    elseif l and dst:match("attn%.qkv%.") then
      local thirds = { q = 0, k = 1, v = 2 }
      if tr then   -- HF: one third
        local j = thirds[tr]
        if slice then t = core.tensor_select(t, 1, head_ranges(kept[l + 1], hd, j * D))
        else t = core.tensor_select(t, 1, { { j * D, j * D + D } }) end
      elseif slice then
        local ranges = {}
        for j = 0, 2 do
          for _, x in ipairs(head_ranges(kept[l + 1], hd, j * D)) do ranges[#ranges + 1] = x end
        end
        t = core.tensor_select(t, 1, ranges)
      end
    elseif tr == "q" or tr == "k" or tr == "v" then
      err.fail("%s: name map row %s: a q/k/v split of '%s'", who, src, dst)
    elseif tr == "pos" then   -- [1,T,D] -> BERT's [T,D]
      local s = t:shape()
      t = core.tensor_reshape(t, { s[2], s[3] })
    end
    entries[#entries + 1] = { name = src, tensor = t }
    ::continue::
  end

  local origin = imp.origin or core.file_sha256(ckpt)
  local meta = {
    format = "pt",
    ["hydra.version"] = core.version,
    ["hydra.source"] = origin,
    ["hydra.kind"] = member and "member" or "model",
    ["hydra.names"] = fmt,
    ["hydra.heads"] = core.json_encode(kept),
    ["hydra.head_dim"] = tostring(hd),
    ["hydra.n_heads"] = tostring(H),
    ["hydra.ln_eps"] = M.num_str(c.ln_eps or 1e-6),
    ["hydra.act"] = c.act or "gelu",
    ["hydra.sliced"] = slice and "1" or "0",
  }
  if slice then meta["hydra.head_counts"] = core.json_encode(counts) end
  err.wrap(who, core.safetensors_write, opts.out, entries, meta, M.dtype(who, opts.dtype))
  local log = opts.log or function() end
  local kc = 0
  for l = 1, L do kc = kc + counts[l] end
  log(("%s -> %s: %d tensors under %s names, %s%s (%d of %d heads kept)"):format(ckpt, opts.out,
    #entries, fmt, member and "member" or "model",
    member and (slice and ", sliced" or ", dense-masked") or "", kc, L * H))
  return { format = fmt, kind = member and "member" or "model", heads = kept, sliced = slice }
end

-- ===== the fused Hydra model =====
-- fused.safetensors: "members.{m}.<timm name>" (m 0-based; attention tensors packed to the kept
-- heads: qkv [3 k hd, D] rows q | k | v of the kept heads in ascending order, proj [D, k hd]),
-- "members.{m}.head_gates" [L, H], and "shared.<timm name>" (what fuse.* averaged: the merged
-- MLP by default). The name map (JSON, also in __metadata__ "hydra.name_map") says where every
-- tensor comes from: {"fused name": {"member": m, "source": "blocks.3.attn.qkv.weight",
-- "rows": [[a, b], ...]} | {"member": m, "source": ..., "cols": [[a, b], ...]} |
-- {"members": [0, ..., M-1], "source": ..., "reduce": "mean"}} with half-open row / column
-- ranges of the member's full-size tensor; tests/ref/fused_reference.py rebuilds the members
-- from the two files in torch. The map goes to opts.name_map (default: OUT with .safetensors
-- replaced by .name_map.json).
-- A fused text model (BERT-family) exports under Hugging Face names (hf-bert, the only names a
-- text model has): "members.{m}.<HF name>" / "shared.<HF name>", the packed attn.qkv split into
-- attention.self.query / key / value [k hd, D] (map rows: the kept heads' rows of the member's
-- [D, D] tensor), attention.output.dense.weight [D, k hd] (cols), the position table [T, D]
-- (rows [[0, T]] of BERT's position_embeddings).

-- The fused tensors of hydra tensor `name` (its data t) of member m (nil: shared) under the
-- names of rules `rules` (import's name map rows of that hydra name): appends to entries, map.
local function hf_fused_entries(who, rules, name, t, m, kept, hd, all, entries, map)
  if not rules then err.fail("%s: no Hugging Face name for the fused tensor '%s'", who, name) end
  local thirds = { q = 0, k = 1, v = 2 }
  for _, r in ipairs(rules) do
    local src, tr = r[1], r[3]
    local x = t
    local row = m and { member = m, source = src } or { members = all, source = src,
                                                        reduce = "mean" }
    if thirds[tr] then
      local kh = #kept * hd
      x = core.tensor_select(t, 1, { { thirds[tr] * kh, thirds[tr] * kh + kh } })
      row.rows = head_ranges(kept, hd, 0)
    elseif tr == "pos" then   -- [1,T,D] -> BERT's [T,D], the first T rows of the source's table
      local s = t:shape()
      x = core.tensor_reshape(t, { s[2], s[3] })
      row.rows = { { 0, s[2] } }
    elseif name:match("attn%.proj%.weight$") and m then
      row.cols = head_ranges(kept, hd, 0)
    end
    local fname = (m and ("members.%d."):format(m) or "shared.") .. src
    entries[#entries + 1] = { name = fname, tensor = x }
    map[fname] = row
  end
end

function M.fused(opts, f)
  local who = "hydra export"
  local ckpt = opts.ckpt
  if opts.slice then
    err.usage("%s: --slice is for members; a fused model's attention is always packed", who)
  end
  local fz = f:attrs("/fuse")
  local cfg = f:attrs("/config")
  if cfg.kind == "vit" and opts.names == "hf" then
    err.usage("%s: a fused ViT exports under hydra's (timm) names only", who)
  end
  local fmt = format_of(who, opts.names or (cfg.kind == "vit" and "timm" or "hf"), cfg.kind)
  local rules   -- hf: hydra name -> the import map's rows of that name
  if fmt ~= "timm-vit" then
    rules = {}
    for _, r in ipairs(import.expand(import.maps[fmt], cfg.depth)) do
      rules[r[2]] = rules[r[2]] or {}
      table.insert(rules[r[2]], r)
    end
  end
  local Mn, D, H, L = fz.members, cfg.d_model, cfg.n_heads, cfg.depth
  local hd = D // H
  local entries, map, heads = {}, {}, {}
  local all = {}
  for m = 0, Mn - 1 do all[#all + 1] = m end
  for m = 0, Mn - 1 do
    local g = f:read(("/members/%d/head_gates"):format(m)):totable()
    heads[m + 1] = {}
    for l = 1, L do
      heads[m + 1][l] = {}
      for h = 1, H do
        if g[l][h] ~= 0 then heads[m + 1][l][#heads[m + 1][l] + 1] = h - 1 end
      end
    end
    for _, e in ipairs(f:list(("/members/%d"):format(m))) do
      local bl = tonumber(e.name:match("^blocks%.(%d+)%."))
      if e.kind == "dataset" and rules and e.name ~= "head_gates" then
        hf_fused_entries(who, rules[e.name], e.name, f:read(e.path), m,
          bl and heads[m + 1][bl + 1] or {}, hd, all, entries, map)
      elseif e.kind == "dataset" then
        local fname = ("members.%d.%s"):format(m, e.name)
        entries[#entries + 1] = { name = fname, tensor = f:read(e.path) }
        local l = tonumber(e.name:match("^blocks%.(%d+)%.attn%."))
        local row = { member = m, source = e.name }
        if e.name == "head_gates" then
          row.source = nil
          row.kind = "gates"
        elseif l and e.name:match("qkv") then
          local r = {}
          for j = 0, 2 do
            for _, x in ipairs(head_ranges(heads[m + 1][l + 1], hd, j * D)) do r[#r + 1] = x end
          end
          row.rows = r
        elseif l and e.name:match("proj%.weight$") then
          row.cols = head_ranges(heads[m + 1][l + 1], hd, 0)
        end
        map[fname] = row
      end
    end
  end
  if f:exists("/shared") then
    for _, e in ipairs(f:list("/shared")) do
      if e.kind == "dataset" and rules then
        hf_fused_entries(who, rules[e.name], e.name, f:read(e.path), nil, {}, hd, all, entries,
          map)
      elseif e.kind == "dataset" then
        local fname = "shared." .. e.name
        entries[#entries + 1] = { name = fname, tensor = f:read(e.path) }
        map[fname] = { members = all, source = e.name, reduce = "mean" }
      end
    end
  end
  local mapj = core.json_encode(map)
  local conf = {}
  for k, v in pairs(cfg) do conf[k] = v end
  local meta = {
    format = "pt",
    ["hydra.version"] = core.version,
    ["hydra.source"] = core.file_sha256(ckpt),
    ["hydra.kind"] = "fused",
    ["hydra.names"] = fmt,
    ["hydra.fuse"] = core.json_encode({ mlp = fz.mlp, ln = fz.ln, embed = fz.embed,
                                        head = fz.head, members = Mn }),
    ["hydra.config"] = core.json_encode(conf),
    ["hydra.heads"] = core.json_encode(heads),
    ["hydra.head_dim"] = tostring(hd),
    ["hydra.n_heads"] = tostring(H),
    ["hydra.ln_eps"] = M.num_str(cfg.ln_eps or 1e-6),
    ["hydra.act"] = cfg.act or "gelu",
    ["hydra.name_map"] = mapj,
  }
  local map_path = opts.name_map or (opts.out:gsub("%.safetensors$", "") .. ".name_map.json")
  if map_path == opts.out then map_path = opts.out .. ".name_map.json" end
  err.wrap(who, core.safetensors_write, opts.out, entries, meta, M.dtype(who, opts.dtype))
  require("hydra.output").write_text(map_path, mapj .. "\n", who)
  local log = opts.log or function() end
  log(("%s -> %s + %s: fused model of %d members (mlp %s, ln %s, embed %s, head %s), %d tensors")
    :format(ckpt, opts.out, map_path, Mn, fz.mlp, fz.ln, fz.embed, fz.head, #entries))
  return { format = fmt, kind = "fused", heads = heads, name_map = map_path }
end

return M
