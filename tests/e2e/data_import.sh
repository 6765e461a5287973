#!/bin/sh
# tests/e2e/data_import.sh: `hydra data import` on tiny inputs, checking only what it writes:
#   images   an ImageFolder tree (2 splits, 2 classes, a nested folder, an upper-case .JPG, a
#            non-image file) with --mode hf --size 32 (pixels equal PIL/torchvision's from
#            tests/ref/image_ref.h5), the default timm 224 geometry, and --from a checkpoint's
#            /preprocess (attributes carried into /meta)
#   cifar10 / cifar100   3-record binary files written here (labels, planar pixel order, class
#            names), kept 32x32 and upsampled with --size
#   text     RFC 4180 CSV (quotes, "" escapes, embedded comma and newline), TSV, JSONL without
#            labels (OOD, -1), string labels -> sorted class ids, ids [CLS] .. [SEP] [PAD]
#            against hand-worked WordPiece of a 20-token vocab, truncation at --max-len, a
#            sentence pair (type_ids, longest_first), --from a checkpoint's vocab and casing
#   errors   every bad input is one stderr line naming the file, exit 1, no output file.
set -eu
HYDRA=${HYDRA:-./hydra}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-import-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
I=tests/ref/images

# ===== images =====
mkdir -p "$tmp/tree/train/cat" "$tmp/tree/train/dog/sub" "$tmp/tree/val/cat" "$tmp/tree/val/dog"
cp "$I/fruits_rgb_97x61.png" "$tmp/tree/train/cat/a.png"
cp "$I/baboon_rgb_45x77.jpg" "$tmp/tree/train/cat/b.JPG"
cp "$I/logo_rgba_51x59.png" "$tmp/tree/train/dog/c.png"
cp "$I/left_grey_63x49.jpg" "$tmp/tree/train/dog/sub/d.jpeg"
echo "not an image" >"$tmp/tree/train/dog/notes.txt"
cp "$I/messi_rgb_131x53.jpg" "$tmp/tree/val/cat/e.jpg"
cp "$I/butterfly_pal_39x31.png" "$tmp/tree/val/dog/f.png"
"$HYDRA" data import images "$tmp/tree" --mode hf --size 32 --interpolation bilinear \
    --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225 --out "$tmp/hf.h5" >/dev/null
"$HYDRA" data import images "$tmp/tree" --out "$tmp/timm.h5" >/dev/null

# a checkpoint-like file with the /preprocess group `hydra import` writes
cat >"$tmp/mkckpt.lua" <<'LUA'
local h5 = require("hydra.h5")
local f <close> = h5.create(arg[1])
f:set_attr("/preprocess", "mode", "timm")
f:set_attr("/preprocess", "interpolation", "bilinear")
f:set_attr("/preprocess", "size", 24)
f:set_attr("/preprocess", "crop_pct", 0.875)
f:set_attr("/preprocess", "mean", { 0.1, 0.2, 0.3 })
f:set_attr("/preprocess", "std", { 0.4, 0.5, 0.6 })
f:commit()
LUA
"$HYDRA" run "$tmp/mkckpt.lua" "$tmp/ckpt.h5"
"$HYDRA" data import images "$tmp/tree" --from "$tmp/ckpt.h5" --out "$tmp/from.h5" >/dev/null

# ===== CIFAR =====
cat >"$tmp/mkcifar.lua" <<'LUA'
-- 3 records; record r: label(s), then pixel j = (r * 31 + j) % 256 (1024 R, 1024 G, 1024 B)
local function rec(labels, r)
  local px = {}
  for j = 0, 3071 do px[#px + 1] = string.char((r * 31 + j) % 256) end
  return labels .. table.concat(px)
end
local dir = arg[1]
local function write(name, s)
  local f = assert(io.open(dir .. "/" .. name, "wb"))
  f:write(s)
  f:close()
end
os.execute("mkdir -p " .. dir .. "/c10/cifar-10-batches-bin " .. dir .. "/c100")
for b = 1, 5 do
  write("c10/cifar-10-batches-bin/data_batch_" .. b .. ".bin",
    rec(string.char(b % 10), 0) .. rec(string.char(9), 1) .. rec(string.char(0), 2))
end
write("c10/cifar-10-batches-bin/test_batch.bin", rec(string.char(3), 5))
write("c10/cifar-10-batches-bin/batches.meta.txt",
  "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n")
write("c100/train.bin", rec(string.char(4, 42), 0) .. rec(string.char(19, 99), 1))
write("c100/test.bin", rec(string.char(0, 7), 2))
LUA
"$HYDRA" run "$tmp/mkcifar.lua" "$tmp"
"$HYDRA" data import cifar10 "$tmp/c10" --out "$tmp/c10.h5" >/dev/null
"$HYDRA" data import cifar10 "$tmp/c10" --size 48 --mode hf --out "$tmp/c10big.h5" >/dev/null
"$HYDRA" data import cifar100 "$tmp/c100" --out "$tmp/c100.h5" >/dev/null

# ===== text =====
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nfilm\nfine\n,\n"\n.\nquot\n##ed\nmulti\nline\nreview\nun\n##fun\ncafe\n!\n' \
    >"$tmp/vocab.txt"
printf 'id,sentence,label\n1,"The fine, ""quoted"" film.",pos\n2,"multi\nline review",neg\n3,unfun Unfunny,pos\n' \
    >"$tmp/train.csv"
printf 'label\tsentence\nneg\tthe film !\n' >"$tmp/test.tsv"
printf '{"text": "Caf\\u00e9 film", "y": 1}\n\n{"text": "the the the the the the", "y": 0}\n' \
    >"$tmp/ood.jsonl"
"$HYDRA" data import text --split train="$tmp/train.csv" --split test="$tmp/test.tsv" \
    --text-column sentence --label-column label --vocab "$tmp/vocab.txt" --max-len 12 \
    --out "$tmp/text.h5" >/dev/null
"$HYDRA" data import text "$tmp/ood.jsonl" --split ood --text-column text \
    --vocab "$tmp/vocab.txt" --max-len 6 --out "$tmp/ood.h5" >/dev/null
printf 'a,b,label\nthe film,unaffable un,1\n' >"$tmp/pairs.csv"
"$HYDRA" data import text "$tmp/pairs.csv" --text-column a --pair-column b --label-column label \
    --vocab "$tmp/vocab.txt" --max-len 6 --out "$tmp/pairs.h5" >/dev/null
# --from: the vocab, casing and max_len of a checkpoint's /preprocess
cat >"$tmp/mktext.lua" <<'LUA'
local h5 = require("hydra.h5")
local f <close> = h5.create(arg[1])
f:set_attr("/preprocess", "tokenizer", "wordpiece")
f:set_attr("/preprocess", "do_lower_case", 0)
f:set_attr("/preprocess", "max_len", 5)
f:write_strings("/preprocess/vocab", { "[PAD]", "[UNK]", "[CLS]", "[SEP]", "The", "the" })
f:commit()
LUA
"$HYDRA" run "$tmp/mktext.lua" "$tmp/textckpt.h5"
printf 'sentence\nThe the THE the the\n' >"$tmp/cased.tsv"
"$HYDRA" data import text "$tmp/cased.tsv" --text-column sentence --from "$tmp/textckpt.h5" \
    --out "$tmp/cased.h5" >/dev/null

cat >"$tmp/check.lua" <<'LUA'
local h5 = require("hydra.h5")
local core = require("hydra.core")
local tmp = arg[1]
local function eq(a, b, what)
  if a ~= b then error(("%s: got %s, want %s"):format(what, tostring(a), tostring(b)), 2) end
end
local function list_eq(t, want, what)
  eq(#t, #want, what .. " (length)")
  for i = 1, #want do eq(t[i], want[i], what .. "[" .. i .. "]") end
end

-- images, hf 32 bilinear: shapes, torchvision's order and labels, /meta
local f <close> = h5.open(tmp .. "/hf.h5")
list_eq(f:read("/train/images"):shape(), { 4, 3, 32, 32 }, "hf train shape")
list_eq(f:read("/train/labels"):totable(), { 0, 0, 1, 1 }, "train labels")
list_eq(f:read("/val/labels"):totable(), { 0, 1 }, "val labels")
list_eq(f:read_strings("/classes"), { "cat", "dog" }, "classes")
local m = f:attrs("/meta")
eq(m.mode, "hf", "mode"); eq(m.size, 32, "size"); eq(m.interpolation, "bilinear", "interp")
list_eq(m.mean, { 0.485, 0.456, 0.406 }, "mean"); list_eq(m.std, { 0.229, 0.224, 0.225 }, "std")
eq(m.n_classes, 2, "n_classes")
-- train image 1 is fruits_rgb_97x61.png: equal to PIL's Resize((32, 32), BILINEAR) (the
-- fixture's pipeline row for that file with hf, bilinear, 32)
local ref <close> = h5.open("tests/ref/image_ref.h5")
local files = ref:read_strings("/files")
local index, data = ref:read("/pipeline/index", "int64"), ref:read("/pipeline/data")
local fi
for i, n in ipairs(files) do if n == "fruits_rgb_97x61.png" then fi = i - 1 end end
local found = false
for r = 1, index:size(1) do
  local off, h, w, file, hf, bicubic = index:get(r, 1), index:get(r, 2), index:get(r, 3),
    index:get(r, 4), index:get(r, 5), index:get(r, 6)
  if file == fi and hf == 1 and bicubic == 0 and h == 32 then
    local img = f:read("/train/images")
    for y = 1, 32, 7 do
      for x = 1, 32, 5 do
        for c = 1, 3 do
          local want = data:get(off + ((y - 1) * 32 + (x - 1)) * 3 + c)
          eq(img:get(1, c, y, x), want, ("pixel c%d y%d x%d"):format(c, y, x))
        end
      end
    end
    found = true
  end
end
assert(found, "no fixture row for fruits hf bilinear 32")
-- the default geometry: timm 224, mean = std = 0.5; the loader reads 3 channels
local g <close> = h5.open(tmp .. "/timm.h5")
list_eq(g:read("/val/images"):shape(), { 2, 3, 224, 224 }, "timm val shape")
eq(g:attr("/meta", "crop_pct"), 0.9, "crop_pct")
local ds = core.dataset_load(tmp .. "/timm.h5", "train", 0)
eq(ds:size(), 4, "loaded train")
-- --from: the checkpoint's /preprocess
local h <close> = h5.open(tmp .. "/from.h5")
local hm = h:attrs("/meta")
eq(hm.mode, "timm", "from mode"); eq(hm.size, 24, "from size"); eq(hm.crop_pct, 0.875, "crop")
eq(hm.interpolation, "bilinear", "from interp"); list_eq(hm.std, { 0.4, 0.5, 0.6 }, "from std")
list_eq(h:read("/train/images"):shape(), { 4, 3, 24, 24 }, "from shape")

-- CIFAR-10: 5 batches of 3 records -> 15, planar pixel order kept, names from batches.meta.txt
local c <close> = h5.open(tmp .. "/c10.h5")
local ci, cl = c:read("/train/images"), c:read("/train/labels")
list_eq(ci:shape(), { 15, 3, 32, 32 }, "cifar10 train shape")
list_eq(cl:totable(), { 1, 9, 0, 2, 9, 0, 3, 9, 0, 4, 9, 0, 5, 9, 0 }, "cifar10 labels")
-- record 2 (r = 1): G plane, row 3, col 6 -> byte j = 1024 + 2 * 32 + 5
eq(ci:get(2, 2, 3, 6), (31 + 1024 + 69) % 256, "cifar pixel order")
list_eq(c:read("/test/labels"):totable(), { 3 }, "cifar10 test")
eq(c:read_strings("/classes")[10], "truck", "class names")
list_eq(h5.open(tmp .. "/c10big.h5"):read("/test/images"):shape(), { 1, 3, 48, 48 }, "upsampled")
local d <close> = h5.open(tmp .. "/c100.h5")
list_eq(d:read("/train/labels"):totable(), { 42, 99 }, "cifar100 fine")
list_eq(d:read("/train/coarse_labels"):totable(), { 4, 19 }, "cifar100 coarse")
eq(d:attr("/meta", "n_classes"), 100, "cifar100 classes")

-- text: ids by hand from vocab.txt ([PAD]0 [UNK]1 [CLS]2 [SEP]3 [MASK]4 the5 film6 fine7 ,8
-- "9 .10 quot11 ##ed12 multi13 line14 review15 un16 ##fun17 cafe18 !19)
local t <close> = h5.open(tmp .. "/text.h5")
local ids, len = t:read("/train/ids"), t:read("/train/lengths")
local function row(r) local o = {} for k = 1, 12 do o[k] = ids:get(r, k) end return o end
-- "The fine, ""quoted"" film." -> the fine , " quot ##ed " film .
list_eq(row(1), { 2, 5, 7, 8, 9, 11, 12, 9, 6, 10, 3, 0 }, "csv row 1")
-- "multi\nline review" -> multi line review
list_eq(row(2), { 2, 13, 14, 15, 3, 0, 0, 0, 0, 0, 0, 0 }, "csv row 2 (embedded newline)")
-- "unfun Unfunny" -> un ##fun, [UNK] (no piece for "##ny": the whole word)
list_eq(row(3), { 2, 16, 17, 1, 3, 0, 0, 0, 0, 0, 0, 0 }, "csv row 3")
list_eq(len:totable(), { 11, 5, 5 }, "lengths")
-- string labels -> sorted classes: neg 0, pos 1
list_eq(t:read("/train/labels"):totable(), { 1, 0, 1 }, "train labels")
list_eq(t:read("/test/labels"):totable(), { 0 }, "test labels")
list_eq(t:read_strings("/classes"), { "neg", "pos" }, "text classes")
local tm = t:attrs("/meta")
eq(tm.tokenizer, "wordpiece", "tokenizer"); eq(tm.do_lower_case, 1, "lower")
eq(tm.max_len, 12, "max_len"); eq(tm.cls_id, 2, "cls_id"); eq(#t:read_strings("/vocab"), 20, "V")
eq(tm.vocab_sha256, core.hash_file(tmp .. "/vocab.txt"), "vocab sha256 = sha256 of the file")
local bytes, offs = t:read("/train/text"), t:read("/train/text_offsets")
eq(offs:get(2) - offs:get(1), #'The fine, "quoted" film.', "raw text kept")
-- JSONL, no labels: -1; accents stripped (Café -> cafe); truncation to max_len 6 (4 pieces)
local o <close> = h5.open(tmp .. "/ood.h5")
local oi = o:read("/ood/ids")
list_eq({ oi:get(1, 1), oi:get(1, 2), oi:get(1, 3), oi:get(1, 4) }, { 2, 18, 6, 3 }, "jsonl 1")
list_eq({ oi:get(2, 1), oi:get(2, 5), oi:get(2, 6) }, { 2, 5, 3 }, "truncated to 6")
list_eq(o:read("/ood/labels"):totable(), { -1, -1 }, "OOD labels")
-- a pair at max_len 6: a = the film (5 6), b = unaffable un ([UNK] 16: no "##a..." piece);
-- longest_first to 6 - 3 = 3 pieces: a tie (2, 2) cuts b first -> [CLS] the film [SEP] [UNK] [SEP]
local p <close> = h5.open(tmp .. "/pairs.h5")
local pi, pt = p:read("/train/ids"), p:read("/train/type_ids")
local prow, trow = {}, {}
for k = 1, 6 do prow[k], trow[k] = pi:get(1, k), pt:get(1, k) end
list_eq(prow, { 2, 5, 6, 3, 1, 3 }, "pair ids")
list_eq(trow, { 0, 0, 0, 0, 1, 1 }, "pair type ids")
-- --from: cased (do_lower_case 0), max_len 5 from the checkpoint
local q <close> = h5.open(tmp .. "/cased.h5")
local qi = q:read("/train/ids")
list_eq({ qi:get(1, 1), qi:get(1, 2), qi:get(1, 3), qi:get(1, 4), qi:get(1, 5) },
  { 2, 4, 5, 1, 3 }, "cased ids from the checkpoint's vocab")
eq(q:attr("/meta", "do_lower_case"), 0, "casing from the checkpoint")
print("data_import: ok")
LUA
"$HYDRA" run "$tmp/check.lua" "$tmp"

# ===== errors: one line naming the file, exit 1, nothing written =====
fails() {   # fails "expected text" args...
    want=$1
    shift
    rm -f "$tmp/bad.h5"
    if "$HYDRA" data import "$@" --out "$tmp/bad.h5" >"$tmp/out" 2>"$tmp/err"; then
        echo "expected failure: $*"; exit 1
    fi
    if [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/err"; then
        echo "for: $*"; echo "want one line with: $want"; echo "got:"; cat "$tmp/err"; exit 1
    fi
    if [ -e "$tmp/bad.h5" ]; then echo "output left behind: $*"; exit 1; fi
}
fails "'$tmp/none' is not a directory" images "$tmp/none"
mkdir -p "$tmp/empty" "$tmp/nocls/train"
fails "'$tmp/empty' has no split directories" images "$tmp/empty"
fails "'$tmp/nocls/train' has no class directories" images "$tmp/nocls"
cp -r "$tmp/tree" "$tmp/miss" && rm -r "$tmp/miss/val/dog"
fails "'$tmp/miss/val' has no class 'dog'" images "$tmp/miss"
cp -r "$tmp/tree" "$tmp/badimg" && echo garbage >"$tmp/badimg/val/dog/g.png"
fails "'$tmp/badimg/val/dog/g.png' is neither a PNG nor a JPEG file" images "$tmp/badimg"
rm "$tmp/badimg/val/dog/g.png" && head -c 300 "$I/fruits_rgb_97x61.png" >"$tmp/badimg/val/dog/g.png"
fails "'$tmp/badimg/val/dog/g.png': corrupt PNG" images "$tmp/badimg"
fails "'$tmp/tree/train/cat/a.png' is 97x61 = 5917 pixels, more than the limit 5000" \
    images "$tmp/tree" --max-pixels 5000
printf 'sentence,label\nok,1\nthree,0,x\n' >"$tmp/b1.csv"
fails "'$tmp/b1.csv':3: row has 3 fields, the header has 2" text "$tmp/b1.csv" \
    --text-column sentence --label-column label --vocab "$tmp/vocab.txt"
printf 'sentence,label\n"never closed,1\n' >"$tmp/b2.csv"
fails "'$tmp/b2.csv':2: the file ends inside a quoted field" text "$tmp/b2.csv" \
    --text-column sentence --label-column label --vocab "$tmp/vocab.txt"
printf 'sentence\tlabel\nfine\t1\nbad \377 byte\t0\n' >"$tmp/b3.tsv"
fails "'$tmp/b3.tsv':3: column 'sentence' is not valid UTF-8 (byte 4)" text "$tmp/b3.tsv" \
    --text-column sentence --label-column label --vocab "$tmp/vocab.txt"
fails "'$tmp/train.csv':1: no column 'nope' in the header (columns: id, sentence, label)" \
    text "$tmp/train.csv" --text-column nope --vocab "$tmp/vocab.txt"
fails "'$tmp/c100/data_batch_1.bin' is missing" cifar10 "$tmp/c100"
head -c 3075 "$tmp/c100/train.bin" >"$tmp/c100/test.bin"
fails "'$tmp/c100/test.bin' is 3075 bytes, not a multiple of the 3074-byte CIFAR-100 record" \
    cifar100 "$tmp/c100"
echo "data_import: errors ok"
