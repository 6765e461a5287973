-- hydra data import images|cifar10|cifar100|text ...: a user's own data set as a prepared file
-- (DESIGN §5 layout), preprocessed the way the source model expects (ecosystem_2 §3, §6.3).
--
--   images DIR   an ImageFolder tree DIR/<split>/<class>/**/*.png|jpg|jpeg (torchvision's
--                order: classes = sorted sub-directory names -> ids 0..K-1, the same classes in
--                every split; files of each class in sorted os.walk order; other files
--                ignored), decoded to RGB and preprocessed (timm or HF geometry) ->
--                /<split>/images uint8 [N,3,S,S], /<split>/labels int16 [N], /classes
--   cifar10 DIR  data_batch_1..5.bin -> train, test_batch.bin -> test (in DIR or
--                DIR/cifar-10-batches-bin); cifar100 DIR: train.bin, test.bin (or in
--                DIR/cifar-100-binary), fine labels, /<split>/coarse_labels; kept 32x32 unless
--                a geometry is given (--size / --from), then preprocessed like images
--   text FILE    CSV / TSV / JSONL records (core/data/table.h), tokenised with BERT's
--                WordPiece (core/data/wordpiece.h) -> /<split>/ids int32 [N,max_len]
--                ([CLS] pieces [SEP], then [PAD]), /<split>/lengths int32 [N] (with [CLS] and
--                [SEP]), /<split>/labels int16 [N] (-1 without --label-column),
--                /<split>/text + text_offsets (the raw texts), /vocab; with --pair-column B:
--                [CLS] a [SEP] b [SEP], /<split>/type_ids int32 [N,max_len], pair_text(_offsets)
-- /meta of image files: mean, std (3 each; the loader normalises (p/255 - mean)/std), mode,
-- interpolation, size, crop_pct, n_classes, source, inputs_sha256; of text files: tokenizer =
-- "wordpiece", do_lower_case, max_len, vocab_sha256, vocab_size, special ids, n_classes,
-- label_names. The output is written under a temporary name and renamed at the end, so a
-- failure leaves nothing; every bad input is a one-line error naming the file.
local argparse = require("hydra.argparse")
local core = require("hydra.core")
local err = require("hydra.err")
local h5 = require("hydra.h5")

local M = {}

local USAGE = "hydra data import images DIR | cifar10 DIR | cifar100 DIR | text FILE --out " ..
  "DATA.h5 [options]"
-- timm's ViT defaults (vit_*_patch16_224.augreg: crop_pct 0.9, bicubic, mean = std = 0.5)
local DEFAULT_PREP = { mode = "timm", interpolation = "bicubic", size = 224, crop_pct = 0.9,
                       mean = { 0.5, 0.5, 0.5 }, std = { 0.5, 0.5, 0.5 } }
local DEFAULT_MAX_LEN = 128

local function wrap(fn, ...) return err.wrap(nil, fn, ...) end

local function is_dir(p) return core.stat(p) == "dir" end

local function join(a, b) return a == "" and b or (a:sub(-1) == "/" and a .. b or a .. "/" .. b) end

local function numbers3(who, name, s)
  local t = {}
  for x in (s .. ","):gmatch("([^,]*),") do
    local v = tonumber(x)
    if not v then err.usage("%s: --%s expects 3 numbers a,b,c (got '%s')", who, name, s) end
    t[#t + 1] = v
  end
  if #t ~= 3 then err.usage("%s: --%s expects 3 numbers a,b,c (got '%s')", who, name, s) end
  return t
end

local function attr_or_nil(f, obj, key)
  local ok, v = pcall(function() return f:attr(obj, key) end)
  if ok then return v end
  return nil
end

-- The /preprocess group of a checkpoint (written by `hydra import`).
local function read_preprocess(who, path)
  if not h5.exists(path) then err.fail("%s: --from '%s': no such HDF5 file", who, path) end
  local f <close> = wrap(h5.open, path)
  if not f:exists("/preprocess") then
    err.fail("%s: --from '%s' has no /preprocess group (written by 'hydra import')", who, path)
  end
  return f:attrs("/preprocess"), f:exists("/preprocess/vocab") and f:read_strings("/preprocess/vocab")
end

-- The image preprocessing from the options (--from first, each option overriding it).
local function image_prep(who, o, default)
  local p = {}
  for k, v in pairs(default or {}) do p[k] = v end
  local from = false
  if o.from then
    local a = read_preprocess(who, o.from)
    for _, k in ipairs({ "mode", "interpolation", "size", "crop_pct", "mean", "std" }) do
      if a[k] == nil then
        err.fail("%s: --from '%s': /preprocess has no attribute '%s'", who, o.from, k)
      end
      p[k] = a[k]
    end
    if type(p.mean) == "number" then p.mean = { p.mean, p.mean, p.mean } end
    if type(p.std) == "number" then p.std = { p.std, p.std, p.std } end
    from = true
  end
  if o.mode then p.mode = o.mode end
  if o.interpolation then p.interpolation = o.interpolation end
  if o.size then p.size = o.size end
  if o["crop-pct"] then p.crop_pct = o["crop-pct"] end
  if o.mean then p.mean = numbers3(who, "mean", o.mean) end
  if o.std then p.std = numbers3(who, "std", o.std) end
  local geometry = from or o.mode or o.size or o["crop-pct"] or o.interpolation
  if p.mode ~= "timm" and p.mode ~= "hf" then
    err.usage("%s: --mode must be timm or hf (got '%s')", who, tostring(p.mode))
  end
  if p.interpolation ~= "bicubic" and p.interpolation ~= "bilinear" then
    err.usage("%s: --interpolation must be bicubic or bilinear (got '%s')", who,
      tostring(p.interpolation))
  end
  p.size = math.tointeger(p.size)
  if not p.size or p.size < 1 or p.size > 4096 then
    err.usage("%s: --size must be an integer in [1, 4096]", who)
  end
  if p.mode == "timm" and not (type(p.crop_pct) == "number" and p.crop_pct > 0 and p.crop_pct <= 1) then
    err.usage("%s: --crop-pct must be in (0, 1] (got %s)", who, tostring(p.crop_pct))
  end
  if p.mode == "hf" then p.crop_pct = 1.0 end
  if #p.mean ~= 3 or #p.std ~= 3 then err.usage("%s: mean and std need 3 values each", who) end
  for c = 1, 3 do
    if not (p.std[c] > 0) then err.usage("%s: --std values must be > 0 (got %g)", who, p.std[c]) end
  end
  return p, geometry
end

local function set_prep_meta(f, p, resized)
  f:set_attr("/meta", "mean", p.mean)
  f:set_attr("/meta", "std", p.std)
  f:set_attr("/meta", "channels", 3)
  if resized then
    f:set_attr("/meta", "mode", p.mode)
    f:set_attr("/meta", "interpolation", p.interpolation)
    f:set_attr("/meta", "size", p.size)
    f:set_attr("/meta", "crop_pct", p.crop_pct)
  end
end

local function check_out(who, o)
  if not o.out then err.usage("%s: --out DATA.h5 is required", who) end
  if core.stat(o.out) and not o.force then
    err.fail("%s: '%s' exists (--force replaces it)", who, o.out)
  end
end

-- ===== images (ImageFolder) =====

local IMG_EXT = { png = true, jpg = true, jpeg = true }

-- Every image file under dir, in torchvision's make_dataset order: sorted(os.walk(dir)) (by
-- directory path, bytewise), files sorted within each directory.
local function walk_images(dir)
  local dirs = { dir }
  local i = 1
  while i <= #dirs do
    for _, name in ipairs(wrap(core.listdir, dirs[i])) do
      local p = join(dirs[i], name)
      if is_dir(p) then dirs[#dirs + 1] = p end
    end
    i = i + 1
  end
  table.sort(dirs)
  local files = {}
  for _, d in ipairs(dirs) do
    for _, name in ipairs(wrap(core.listdir, d)) do
      local ext = name:match("%.([^./]+)$")
      local p = join(d, name)
      if ext and IMG_EXT[ext:lower()] and core.stat(p) == "file" then files[#files + 1] = p end
    end
  end
  return files
end

local function subdirs(who, dir)
  if core.stat(dir) ~= "dir" then err.fail("%s: '%s' is not a directory", who, dir) end
  local out = {}
  for _, name in ipairs(wrap(core.listdir, dir)) do
    if name:sub(1, 1) ~= "." and is_dir(join(dir, name)) then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

local function inputs_hash(files, root)
  local lines = {}
  for i, p in ipairs(files) do
    lines[i] = wrap(core.hash_file, p) .. "  " .. p:sub(#root + 2) .. "\n"
  end
  return core.hash_string(table.concat(lines))
end

function M.images(o)
  local say = o.log or print   -- o.log: a run's log (hydra.sources), else stdout
  local who = "data import images"
  local dir = o.positional[2]
  check_out(who, o)
  local p = image_prep(who, o, DEFAULT_PREP)
  local splits = subdirs(who, dir)
  if #splits == 0 then
    err.fail("%s: '%s' has no split directories (expected DIR/<split>/<class>/*.png|jpg)", who, dir)
  end
  local classes, plan, all_files = nil, {}, {}
  for _, s in ipairs(splits) do
    local sdir = join(dir, s)
    local cls = subdirs(who, sdir)
    if #cls == 0 then err.fail("%s: '%s' has no class directories", who, sdir) end
    if not classes then
      classes = cls
    else
      local have = {}
      for _, c in ipairs(cls) do have[c] = true end
      for _, c in ipairs(classes) do
        if not have[c] then
          err.fail("%s: '%s' has no class '%s' (split '%s' has it; every split needs the same " ..
            "classes)", who, sdir, c, splits[1])
        end
      end
      if #cls ~= #classes then
        local want = {}
        for _, c in ipairs(classes) do want[c] = true end
        for _, c in ipairs(cls) do
          if not want[c] then
            err.fail("%s: '%s' has class '%s', which split '%s' lacks", who, join(sdir, c), c,
              splits[1])
          end
        end
      end
    end
    local files, labels = {}, {}
    for k, c in ipairs(cls) do
      local cf = walk_images(join(sdir, c))
      if #cf == 0 then
        err.fail("%s: '%s' holds no .png, .jpg or .jpeg file", who, join(sdir, c))
      end
      for _, f in ipairs(cf) do
        files[#files + 1] = f
        labels[#labels + 1] = k - 1
        all_files[#all_files + 1] = f
      end
    end
    plan[#plan + 1] = { name = s, files = files, labels = labels }
  end
  if #classes > 32767 then err.fail("%s: %d classes (at most 32767)", who, #classes) end
  local max_pixels = o["max-pixels"] or core.img_max_pixels
  local f <close> = wrap(h5.create, o.out)
  for _, sp in ipairs(plan) do
    local images = wrap(core.imgprep_files, sp.files, p, max_pixels)
    f:write("/" .. sp.name .. "/images", images)
    f:write("/" .. sp.name .. "/labels", core.from_table("int16", sp.labels))
    f:set_attr("/meta", "n_" .. sp.name, #sp.files)
    say(("%s: %d images, %d classes -> /%s/images [%d,3,%d,%d]"):format(join(dir, sp.name),
      #sp.files, #classes, sp.name, #sp.files, p.size, p.size))
  end
  f:write_strings("/classes", classes)
  set_prep_meta(f, p, true)
  f:set_attr("/meta", "name", o.name or o.out:match("([^/]+)%.h5$") or o.out)
  f:set_attr("/meta", "source", "hydra data import images " .. dir)
  f:set_attr("/meta", "kind", "image")
  f:set_attr("/meta", "n_classes", #classes)
  f:set_attr("/meta", "label_names", table.concat(classes, " "))
  f:set_attr("/meta", "inputs_sha256", inputs_hash(all_files, dir))
  f:commit()
  say(o.out)
end

-- ===== CIFAR =====

local CIFAR = {
  cifar10 = { sub = "cifar-10-batches-bin", label_bytes = 1, names = "batches.meta.txt",
              splits = { { "train", { "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                      "data_batch_4.bin", "data_batch_5.bin" } },
                         { "test", { "test_batch.bin" } } } },
  cifar100 = { sub = "cifar-100-binary", label_bytes = 2, names = "fine_label_names.txt",
               splits = { { "train", { "train.bin" } }, { "test", { "test.bin" } } } },
}

function M.cifar(o, kind)
  local say = o.log or print   -- o.log: a run's log (hydra.sources), else stdout
  local who = "data import " .. kind
  local spec = CIFAR[kind]
  local dir = o.positional[2]
  check_out(who, o)
  if core.stat(dir) ~= "dir" then err.fail("%s: '%s' is not a directory", who, dir) end
  if is_dir(join(dir, spec.sub)) and core.stat(join(dir, spec.splits[1][2][1])) ~= "file" then
    dir = join(dir, spec.sub)
  end
  local p, geometry = image_prep(who, o, DEFAULT_PREP)
  local f <close> = wrap(h5.create, o.out)
  local files = {}
  for _, sp in ipairs(spec.splits) do
    local paths = {}
    for _, name in ipairs(sp[2]) do
      local path = join(dir, name)
      if core.stat(path) ~= "file" then
        err.fail("%s: '%s' is missing (expected the %s binary files %s)", who, path, kind,
          table.concat(sp[2], ", "))
      end
      paths[#paths + 1] = path
      files[#files + 1] = path
    end
    local images, labels, coarse = wrap(core.cifar_read, paths, spec.label_bytes)
    if geometry then images = wrap(core.imgprep_stack, images, p) end
    f:write("/" .. sp[1] .. "/images", images)
    f:write("/" .. sp[1] .. "/labels", labels)
    if spec.label_bytes == 2 then f:write("/" .. sp[1] .. "/coarse_labels", coarse) end
    f:set_attr("/meta", "n_" .. sp[1], images:size(1))
    say(("%s: %d images -> /%s/images [%d,3,%d,%d]"):format(kind, images:size(1), sp[1],
      images:size(1), images:size(3), images:size(4)))
  end
  local ncls = spec.label_bytes == 1 and 10 or 100
  local np = join(dir, spec.names)
  if core.stat(np) == "file" then
    local names = {}
    for line in io.lines(np) do
      line = line:gsub("%s+$", "")
      if line ~= "" then names[#names + 1] = line end
    end
    if #names == ncls then
      f:write_strings("/classes", names)
      f:set_attr("/meta", "label_names", table.concat(names, " "))
    end
  end
  set_prep_meta(f, p, geometry)
  f:set_attr("/meta", "name", o.name or o.out:match("([^/]+)%.h5$") or o.out)
  f:set_attr("/meta", "source", "hydra data import " .. kind .. " " .. dir ..
    " (https://www.cs.toronto.edu/~kriz/cifar.html)")
  f:set_attr("/meta", "kind", "image")
  f:set_attr("/meta", "n_classes", ncls)
  f:set_attr("/meta", "inputs_sha256", inputs_hash(files, dir))
  f:commit()
  say(o.out)
end

-- ===== text =====

local function text_splits(who, o)
  local out = {}
  local list = o.split or {}
  if o.positional[2] then
    if #o.positional > 2 then err.usage("%s: one FILE (more splits: --split NAME=FILE)", who) end
    if #list > 1 or (list[1] and list[1]:find("=", 1, true)) then
      err.usage("%s: with a FILE argument, --split names its split (--split NAME)", who)
    end
    out[1] = { name = list[1] or "train", file = o.positional[2] }
  else
    for _, s in ipairs(list) do
      local name, file = s:match("^([%w_%-]+)=(.+)$")
      if not name then err.usage("%s: --split expects NAME=FILE (got '%s')", who, s) end
      out[#out + 1] = { name = name, file = file }
    end
  end
  if #out == 0 then err.usage("%s: no input (FILE or --split NAME=FILE)", who) end
  local seen = {}
  for _, s in ipairs(out) do
    if not s.name:match("^[%w_%-]+$") then err.usage("%s: bad split name '%s'", who, s.name) end
    if seen[s.name] then err.usage("%s: split '%s' given twice", who, s.name) end
    seen[s.name] = true
  end
  return out
end

function M.text(o)
  local say = o.log or print   -- o.log: a run's log (hydra.sources), else stdout
  local who = "data import text"
  check_out(who, o)
  if not o["text-column"] then err.usage("%s: --text-column C is required", who) end
  local splits = text_splits(who, o)
  -- the tokenizer: --vocab, or a checkpoint's /preprocess (vocab, do_lower_case, max_len)
  local wp, lower, max_len, vsrc
  if o.from then
    local a, vocab = read_preprocess(who, o.from)
    if not vocab then err.fail("%s: --from '%s' has no /preprocess/vocab", who, o.from) end
    if o.vocab then err.usage("%s: give --vocab or --from, not both", who) end
    wp = wrap(core.wordpiece_from_tokens, vocab, ("'%s' /preprocess/vocab"):format(o.from))
    lower = a.do_lower_case
    if lower ~= nil then lower = lower ~= 0 and lower ~= false end
    max_len = math.tointeger(a.max_len)
    vsrc = o.from .. ":/preprocess/vocab"
  elseif o.vocab then
    wp = wrap(core.wordpiece_load, o.vocab)
    vsrc = o.vocab
  else
    err.usage("%s: --vocab vocab.txt (or --from CKPT.h5) is required", who)
  end
  if o.lower and o["no-lower"] then err.usage("%s: --lower or --no-lower, not both", who) end
  if o.lower then lower = true elseif o["no-lower"] then lower = false end
  if lower == nil then lower = true end
  max_len = o["max-len"] or max_len or DEFAULT_MAX_LEN
  if max_len < 2 or max_len > 65536 then err.usage("%s: --max-len must be in [2, 65536]", who) end
  wp:set_options({ do_lower_case = lower })
  local sp = wp:specials()
  for _, k in ipairs({ "cls", "sep", "pad" }) do
    if not sp[k] then err.fail("%s: %s has no [%s] token", who, vsrc, k:upper()) end
  end
  -- read every split first (labels are mapped over all of them)
  local label_col = o["label-column"]
  local recs = {}
  for _, s in ipairs(splits) do
    recs[#recs + 1] = wrap(core.table_read, s.file, o["text-column"], label_col,
      o["pair-column"])
  end
  local classes, ids_of, all_int = nil, nil, true
  if label_col then
    for _, r in ipairs(recs) do
      for _, l in ipairs(r.labels) do
        if not l:match("^%-?%d+$") then all_int = false end
      end
    end
    if not all_int then
      local set = {}
      for _, r in ipairs(recs) do for _, l in ipairs(r.labels) do set[l] = true end end
      classes = {}
      for l in pairs(set) do classes[#classes + 1] = l end
      table.sort(classes)
      if #classes > 32767 then err.fail("%s: %d distinct labels (at most 32767)", who, #classes) end
      ids_of = {}
      for i, c in ipairs(classes) do ids_of[c] = i - 1 end
    end
  end
  local f <close> = wrap(h5.create, o.out)
  local n_classes = classes and #classes or 0
  for k, s in ipairs(splits) do
    local r = recs[k]
    local ids, lengths, st, types = wrap(wp.encode_all, wp, r.texts, max_len, r.pairs)
    local labels = {}
    for i = 1, r.n do
      if not label_col then
        labels[i] = -1
      elseif ids_of then
        labels[i] = ids_of[r.labels[i]]
      else
        local v = math.tointeger(tonumber(r.labels[i]))
        if not v or v < -1 or v > 32767 then
          err.fail("%s: '%s':%d: label '%s' out of range [-1, 32767] (-1: OOD)", who, s.file, r.lines[i],
            r.labels[i])
        end
        labels[i] = v
        if v + 1 > n_classes then n_classes = v + 1 end
      end
    end
    local g = "/" .. s.name
    f:write(g .. "/ids", ids)
    f:write(g .. "/lengths", lengths)
    f:write(g .. "/labels", core.from_table("int16", labels))
    f:write(g .. "/text", r.bytes)
    f:write(g .. "/text_offsets", r.offsets)
    if types then
      f:write(g .. "/type_ids", types)
      f:write(g .. "/pair_text", r.pair_bytes)
      f:write(g .. "/pair_text_offsets", r.pair_offsets)
    end
    f:set_attr("/meta", "n_" .. s.name, r.n)
    f:set_attr("/meta", "truncated_" .. s.name, st.truncated)
    f:set_attr("/meta", "unk_rate_" .. s.name, st.pieces > 0 and st.unk / st.pieces or 0)
    say(("%s: %d records -> /%s (max_len %d, %d truncated, %d [UNK] of %d pieces)"):format(
      s.file, r.n, s.name, max_len, st.truncated, st.unk, st.pieces))
  end
  f:write_strings("/vocab", wp:tokens())
  if classes then
    f:write_strings("/classes", classes)
    local names = {}
    for i, c in ipairs(classes) do names[i] = ("%d %s"):format(i - 1, c) end
    f:set_attr("/meta", "label_names", table.concat(names, ", "))
  end
  local files = {}
  for _, s in ipairs(splits) do files[#files + 1] = s.file end
  f:set_attr("/meta", "name", o.name or o.out:match("([^/]+)%.h5$") or o.out)
  f:set_attr("/meta", "kind", "text")
  f:set_attr("/meta", "source", "hydra data import text " .. table.concat(files, " "))
  f:set_attr("/meta", "tokenizer", "wordpiece")
  f:set_attr("/meta", "do_lower_case", lower and 1 or 0)
  f:set_attr("/meta", "max_len", max_len)
  f:set_attr("/meta", "vocab_sha256", wp:sha256())
  f:set_attr("/meta", "vocab_size", wp:size())
  f:set_attr("/meta", "vocab_source", vsrc)
  for _, k in ipairs({ "pad", "unk", "cls", "sep", "mask" }) do
    if sp[k] then f:set_attr("/meta", k .. "_id", sp[k]) end
  end
  if o["pair-column"] then
    f:set_attr("/meta", "pair_column", o["pair-column"])
    f:set_attr("/meta", "tokens", "ids hold [CLS] a [SEP] b [SEP] then [PAD], type_ids 0 for " ..
      "[CLS] a [SEP], 1 for b [SEP]; lengths count the specials; the longer of a and b loses " ..
      "its last piece until both fit max_len - 3 (HF truncation='longest_first')")
  else
    f:set_attr("/meta", "tokens", "ids hold [CLS] wordpieces [SEP] then [PAD]; lengths count " ..
      "[CLS] and [SEP]; truncated to max_len - 2 pieces (HF truncation=True, max_length)")
  end
  f:set_attr("/meta", "n_classes", n_classes)
  local hl = {}
  for _, s in ipairs(splits) do hl[#hl + 1] = wrap(core.hash_file, s.file) .. "  " .. s.file .. "\n" end
  f:set_attr("/meta", "inputs_sha256", core.hash_string(table.concat(hl)))
  f:commit()
  say(o.out)
end

-- ===== dispatch (from `hydra data import ...`) =====

M.usage = USAGE
M.help = [[import    a data set of your own into DATA.h5 (the prepared-file layout):
  images DIR       ImageFolder DIR/<split>/<class>/*.png|jpg|jpeg (same classes in every split)
  cifar10|cifar100 DIR   the CIFAR binary files (kept 32x32 unless a geometry is given)
  text FILE        .csv (RFC 4180) / .tsv / .jsonl with --text-column C [--label-column L]
                   (--split NAME, or several --split NAME=FILE); labels: integers, or strings
                   mapped to sorted class ids; no --label-column: labels -1 (OOD sets)
  image options: --mode timm|hf --size S --crop-pct X --interpolation bicubic|bilinear
                 --mean a,b,c --std a,b,c --from CKPT.h5 (its /preprocess) --max-pixels N
                 (defaults: timm, 224, 0.9, bicubic, mean = std = 0.5; pixel limit 89478485)
  text options:  --vocab vocab.txt | --from CKPT.h5, --lower | --no-lower (default lower),
                 --max-len N (default 128, including [CLS] and [SEP]), --pair-column B
                 (sentence pairs: [CLS] a [SEP] b [SEP] and /<split>/type_ids)
  --force replaces an existing DATA.h5]]

function M.run(rest)
  local o = argparse.parse(rest, {
    command = "data import", usage = USAGE,
    options = { out = "string", force = "flag", mode = "string", size = "integer",
                ["crop-pct"] = "number", interpolation = "string", mean = "string",
                std = "string", from = "string", ["max-pixels"] = "integer",
                ["text-column"] = "string", ["label-column"] = "string", vocab = "string",
                lower = "flag", ["no-lower"] = "flag", ["max-len"] = "integer", split = "list",
                ["pair-column"] = "string" },
    positional = { min = 1, names = { "KIND", "DIR|FILE" } } })
  local kind = o.positional[1]
  if kind == "images" or kind == "cifar10" or kind == "cifar100" then
    if #o.positional ~= 2 then err.usage("hydra data import %s: expects one DIR", kind) end
    if kind == "images" then M.images(o) else M.cifar(o, kind) end
  elseif kind == "text" then
    M.text(o)
  else
    err.usage("hydra data import: unknown kind '%s' (expected images, cifar10, cifar100 or text)",
      tostring(kind))
  end
end

return M
