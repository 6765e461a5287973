#!/bin/sh
# tests/e2e/import_export.sh: `hydra import` / `hydra export` through the CLI, and an imported
# checkpoint through the existing commands. A hydra ViT (model init on the synthetic tiny set) is
# exported under timm names and imported back (no --heads: the export's metadata says it); the
# imported checkpoint predicts bit-identically to the original, and goes through prune ->
# finetune (two members) -> fuse -> predict -> eval and `hydra exp` (train.init = the imported
# checkpoint). The members export dense-masked and sliced; both import back to the member's
# predictions. The committed torch fixtures (tests/ref/import/) import through the CLI (a folder
# for HF), `hydra info` shows the name map, and bad invocations fail with one line, exit 1 or 2,
# no traceback and no output file.
# With HYDRA_TORCH_DIR=DIR, also writes DIR/manifest.json + the exported fixture model and
# members with hydra's logits, for `python3 tests/ref/make_import_ref.py check DIR` (torch).
set -eu
. "$(dirname "$0")/import.inc"
import_setup import_export

# --- a hydra model out and back in ---
cat >"$T/mk.lua" <<'LUA'
require("hydra").model.write_synthetic(arg[1] .. "/tiny.h5",
  { train = 256, val = 64, test = 64, seed = 5 })
LUA
"$HYDRA" run "$T/mk.lua" "$T"
"$HYDRA" model init configs/data/tiny.yaml data.dir="$T" --out "$T/base.h5" --seed 3 >/dev/null
"$HYDRA" export "$T/base.h5" --format safetensors --out "$T/base.safetensors" >/dev/null
"$HYDRA" import "$T/base.safetensors" --format timm-vit --out "$T/imp.h5" >/dev/null
"$HYDRA" info "$T/imp.h5" | grep -q "^imported: timm-vit from '$T/base.safetensors'" ||
    fail "hydra info does not show the import"
"$HYDRA" info "$T/imp.h5" | grep -q "^  blocks.3.attn.qkv.weight -> blocks.3.attn.qkv.weight (copy, F32)$" ||
    fail "hydra info does not show the name map"
"$HYDRA" predict "$T/base.h5" --data "$T/tiny.h5" --split test --out "$T/p0.h5" >/dev/null
"$HYDRA" predict "$T/imp.h5" --data "$T/tiny.h5" --split test --out "$T/p1.h5" >/dev/null
h5diff "$T/p0.h5" "$T/p1.h5" /logits /logits >/dev/null || fail "imported model predicts differently"

# --- the Hydra chain on the imported checkpoint ---
O="data.dir=$T data.id=tiny prune.calib_size=64"
"$HYDRA" prune "$T/imp.h5" --method taylor --members 2 --keep 2 --data "$T/tiny.h5" --quiet \
    --out "$T/gates.h5" $O >/dev/null
"$HYDRA" finetune "$T/imp.h5" --gates "$T/gates.h5" --member 1 --data "$T/tiny.h5" \
    --out "$T/m1.h5" --quiet finetune.epochs=0 $O >/dev/null
"$HYDRA" finetune "$T/imp.h5" --gates "$T/gates.h5" --member 2 --data "$T/tiny.h5" \
    --out "$T/m2.h5" --quiet finetune.epochs=1 $O >/dev/null
"$HYDRA" fuse "$T/m1.h5" "$T/m2.h5" --out "$T/fused.h5" >/dev/null
"$HYDRA" predict "$T/fused.h5" --data "$T/tiny.h5" --split test --out "$T/pf.h5" >/dev/null
"$HYDRA" eval --id "$T/pf.h5" --out "$T/r.h5" >/dev/null
"$HYDRA" info "$T/pf.h5" | grep -q "/member_probs *float32 \[2,64,10\]" || fail "fused predict"

# members: dense-masked and sliced exports import back to the member's predictions
"$HYDRA" predict "$T/m2.h5" --data "$T/tiny.h5" --split test --out "$T/pm.h5" >/dev/null
for mode in dense slice; do
    flag=""; [ $mode = slice ] && flag="--slice"
    "$HYDRA" export "$T/m2.h5" --format safetensors $flag --out "$T/m2_$mode.safetensors" >/dev/null
    "$HYDRA" import "$T/m2_$mode.safetensors" --format timm-vit --out "$T/m2_$mode.h5" >/dev/null
    "$HYDRA" predict "$T/m2_$mode.h5" --data "$T/tiny.h5" --split test --out "$T/pm_$mode.h5" >/dev/null
    h5diff -d 1e-5 "$T/pm.h5" "$T/pm_$mode.h5" /logits /logits >/dev/null ||
        fail "$mode member export does not give the member's logits back"
done
"$HYDRA" export "$T/m2_slice.h5" --format safetensors --slice --out "$T/again.safetensors" >/dev/null
cmp -s "$T/m2_slice.safetensors" "$T/again.safetensors" || fail "re-export is not byte-identical"

# the fused model: fused.safetensors + its name map, the same bytes every time
"$HYDRA" export "$T/fused.h5" --format safetensors --out "$T/fused.safetensors" >/dev/null
"$HYDRA" export "$T/fused.h5" --format safetensors --out "$T/fused2.safetensors" >/dev/null
cmp -s "$T/fused.safetensors" "$T/fused2.safetensors" || fail "fused export is not deterministic"
grep -q '"members.1.blocks.0.attn.qkv.weight":{"member":1,"rows":' "$T/fused.name_map.json" ||
    fail "fused name map"

# hydra exp starting from the imported checkpoint
cat >"$T/exp.yaml" <<YAML
include: $(pwd)/configs/data/tiny.yaml
experiment: import_e2e
results_dir: $T/results
data:
  dir: $T
  ood: []
  ood_val: tiny
  shift: []
train:
  epochs: 1
  init: $T/imp.h5
methods: [single]
YAML
"$HYDRA" exp "$T/exp.yaml" --cache "$T/cache" --quiet --no-progress >"$T/exp.log" 2>&1 ||
    { tail -n 5 "$T/exp.log"; fail "hydra exp with train.init = the imported checkpoint"; }
ls "$T"/results/import_e2e/*/result.h5 >/dev/null 2>&1 || fail "hydra exp wrote no result.h5"

# --- the torch fixtures through the CLI ---
"$HYDRA" import $REF/timm_vit_f16.safetensors --format timm-vit --heads 4 --out "$T/f16.h5" |
    grep -q "32 tensors mapped" || fail "F16 import"
"$HYDRA" import $REF/hf_vit --format hf-vit --out "$T/hf.h5" | grep -q "using config.json, preprocessor_config.json" ||
    fail "an HF folder"
# a sharded HF folder (model.safetensors.index.json + 2 shards) imports as its one-file twin
"$HYDRA" import $REF/hf_bert_sharded --format hf-bert --out "$T/sharded.h5" >"$T/sharded.log"
grep -q "using config.json, model.safetensors.index.json" "$T/sharded.log" || fail "a sharded HF folder"
"$HYDRA" import $REF/hf_bert --format hf-bert --out "$T/onefile.h5" >/dev/null
h5diff "$T/sharded.h5" "$T/onefile.h5" /params /params >/dev/null ||
    fail "the sharded import differs from the one-file import"
mkdir "$T/shards"
cp $REF/hf_bert_sharded/*.safetensors "$T/shards/"
sed 's|"model-00002-of-00002.safetensors"|"../model-00002-of-00002.safetensors"|' \
    $REF/hf_bert_sharded/model.safetensors.index.json >"$T/shards/model.safetensors.index.json"

# --- bad invocations: one line, status, no traceback, no output ---
bad() {   # bad STATUS "message part" ARGS...
    want=$1; msg=$2; shift 2
    rm -f "$T/bad.h5"
    set +e
    "$HYDRA" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    set -e
    [ $rc -eq "$want" ] || fail "'$*' exited $rc, want $want: $(cat "$T/err")"
    grep -qF -- "$msg" "$T/err" || fail "'$*' said: $(cat "$T/err"); want: $msg"
    [ "$(wc -l <"$T/err")" -eq 1 ] || fail "'$*' printed more than one line: $(cat "$T/err")"
    [ ! -e "$T/bad.h5" ] || fail "'$*' left $T/bad.h5"
}
bad 1 "cannot be read from its tensor shapes: give --heads H, --arch NAME or --config config.json" \
    import $REF/timm_vit_f32.safetensors --format timm-vit --out "$T/bad.h5"
bad 2 "give --strict or --no-strict, not both" \
    import $REF/timm_vit_f32.safetensors --format timm-vit --heads 4 --strict --no-strict --out "$T/bad.h5"
bad 2 "--format must be one of timm-vit, hf-vit, hf-bert (got 'onnx')" \
    import $REF/timm_vit_f32.safetensors --format onnx --heads 4 --out "$T/bad.h5"
bad 2 "unknown --arch 'vit_huge'" \
    import $REF/timm_vit_f32.safetensors --format timm-vit --arch vit_huge --out "$T/bad.h5"
bad 1 "no such file" import "$T/nope.safetensors" --format timm-vit --heads 4 --out "$T/bad.h5"
bad 1 "has no tensor 'vit.embeddings.patch_embeddings.projection.weight'" \
    import $REF/timm_vit_f32.safetensors --format hf-vit --heads 4 --out "$T/bad.h5"
head -c 1000 $REF/timm_vit_f32.safetensors >"$T/trunc.safetensors"
bad 1 "trunc.safetensors" import "$T/trunc.safetensors" --format timm-vit --heads 4 --out "$T/bad.h5"
bad 1 "shard '../model-00002-of-00002.safetensors' of tensor 'bert.encoder.layer.1.attention.output.LayerNorm.bias' leaves the index's folder" \
    import "$T/shards" --format hf-bert --heads 4 --out "$T/bad.h5"
bad 2 "--names must be timm or hf (got 'onnx')" export "$T/m2.h5" --format safetensors --names onnx --out "$T/bad.h5"
bad 2 "--format must be safetensors (got 'onnx')" export "$T/m2.h5" --format onnx --out "$T/bad.h5"
bad 2 "--slice is for members" export "$T/fused.h5" --format safetensors --slice --out "$T/bad.h5"

# --- for the torch check (not part of make test) ---
if [ -n "${HYDRA_TORCH_DIR:-}" ]; then
    mkdir -p "$HYDRA_TORCH_DIR"
    cat >"$T/torch.lua" <<'LUA'
local core = require("hydra.core")
local h5 = require("hydra.h5")
local imp, ex = require("hydra.import"), require("hydra.export")
local d, ref = arg[1], "tests/ref/import"
local f <close> = h5.open(ref .. "/ref.h5")
local images = f:read("/images")
local man = {}
local text = { ids = f:read("/hf_bert/ids"), lengths = f:read("/hf_bert/lengths"),
               type_ids = f:read("/hf_bert/type_ids") }
local function add(ckpt, name, fmt, names, slice)
  ex.run({ ckpt = ckpt, names = names, slice = slice, out = d .. "/" .. name .. ".safetensors" })
  local m = core.model_load(ckpt)
  local g <close> = h5.create(d .. "/" .. name .. ".h5")
  if fmt == "hf-bert" then
    for k, v in pairs(text) do g:write("/" .. k, v) end
    g:write("/logits", m:forward(text))
  else
    g:write("/images", images)
    g:write("/logits", m:forward({ images = images }))
  end
  g:commit()
  man[#man + 1] = { file = name .. ".safetensors", format = fmt, logits = name .. ".h5" }
end
for _, src in ipairs({ { "timm", "timm-vit", ref .. "/timm_vit_f32.safetensors" },
                       { "hf", "hf-vit", ref .. "/hf_vit/model.safetensors" },
                       { "bert", "hf-bert", ref .. "/hf_bert/model.safetensors" } }) do
  local base = d .. "/" .. src[1] .. "_base.h5"
  imp.run({ file = src[3], format = src[2], heads = 4, strict = true, out = base,
            config = src[1] == "hf" and (ref .. "/hf_vit/config.json") or
              src[1] == "bert" and (ref .. "/hf_bert/config.json") or nil,
            vocab = ref .. "/hf_bert/vocab.txt" })
  local m = core.model_load(base)
  m:set_gates(core.from_table("float32", { { 1, 0, 1, 0 }, { 0, 0, 0, 0 } }))
  m:save(d .. "/" .. src[1] .. "_member.h5")
  local names = src[1] == "timm" and "timm" or "hf"
  add(base, src[1] .. "_model", src[2], names, false)
  add(d .. "/" .. src[1] .. "_member.h5", src[1] .. "_dense", src[2], names, false)
  add(d .. "/" .. src[1] .. "_member.h5", src[1] .. "_sliced", src[2], names, true)
end
-- the fused models of two timm members and of two HF BERT members (fused_reference.py)
for _, src in ipairs({ { "timm", "fused_", { images = images } },
                       { "bert", "fused_bert_", text } }) do
local tb = core.model_load(d .. "/" .. src[1] .. "_base.h5")
local ms = {}
for i, g in ipairs({ { { 1, 0, 1, 0 }, { 0, 1, 0, 0 } }, { { 0, 1, 1, 1 }, { 1, 0, 0, 1 } } }) do
  tb:set_gates(core.from_table("float32", g))
  tb:save(d .. "/fm" .. i .. ".h5", {})
  ms[i] = core.model_load(d .. "/fm" .. i .. ".h5")
end
for _, mode in ipairs({ "member", "average" }) do
  local fz = core.fused_new(ms, { mlp = "average", ln = mode, embed = mode, head = mode })
  local base = d .. "/" .. src[2] .. mode
  fz:save(base .. ".h5")
  ex.run({ ckpt = base .. ".h5", out = base .. ".safetensors" })
  local lg = fz:forward(src[3])
  local M, B, K = lg:size(1), lg:size(2), lg:size(3)
  local pr = core.tensor("float32", M, B, K)
  for m = 1, M do
    for b = 1, B do
      local mx, z = -math.huge, 0
      for k = 1, K do mx = math.max(mx, lg:get(m, b, k)) end
      for k = 1, K do z = z + math.exp(lg:get(m, b, k) - mx) end
      for k = 1, K do pr:set(m, b, k, math.exp(lg:get(m, b, k) - mx) / z) end
    end
  end
  local g <close> = h5.create(base .. "_probs.h5")
  for k, v in pairs(src[3]) do g:write("/" .. k, v) end
  g:write("/member_probs", pr)
  g:commit()
end
end
local out = assert(io.open(d .. "/manifest.json", "w"))
out:write(core.json_encode(man), "\n")
out:close()
LUA
    "$HYDRA" run "$T/torch.lua" "$HYDRA_TORCH_DIR"
    echo "wrote $HYDRA_TORCH_DIR: run python3 tests/ref/make_import_ref.py check $HYDRA_TORCH_DIR"
fi
echo "import_export ok"
