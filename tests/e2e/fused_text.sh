#!/bin/sh
# tests/e2e/fused_text.sh: an imported HF BERT (the committed fixture tests/ref/import/hf_bert:
# post-LN, token types, LayerNorm eps 1e-12, the tanh pooler) Hydra-ized through the CLI: a
# sentence-pair text set imported with the model's own vocabulary ([CLS] a [SEP] b [SEP], token
# types, padding) -> prune -> finetune two members -> fuse (every part per member) -> predict.
# The fused model's member probabilities equal each member's own predictions (1e-5), and a fused
# model with the averaged MLP predicts too. Both export (`hydra export --format safetensors`)
# under Hugging Face BERT names with their name map, the same bytes every time; when
# /usr/bin/python3 has torch and h5py, tests/ref/fused_reference.py rebuilds each from the two
# files and reproduces hydra's per-member probabilities of the test split within 1e-5.
set -eu
. "$(dirname "$0")/import.inc"
import_setup fused_text

"$HYDRA" import $REF/hf_bert --format hf-bert --out "$T/bert.h5" >/dev/null

# sentence pairs of the fixture's words; the label is told by a word of the first sentence
cat >"$T/mk.lua" <<'LUA'
local words = { "the", "a", "movie", "film", "was", "is", "not", "very", "plot", "acting",
                "story", "music", "score", "really", "quite", "so", "long", "short", "seen" }
local cue = { "good", "bad", "boring" }
local seed = 7
local function rnd(n)   -- a small LCG: the same sets on every machine
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end
for _, split in ipairs({ { "train", 96 }, { "val", 48 }, { "test", 40 } }) do
  local f = assert(io.open(arg[1] .. "/" .. split[1] .. ".csv", "w"))
  f:write("a,b,label\n")
  for _ = 1, split[2] do
    local y, a, b = rnd(3), {}, {}
    for _ = 1, rnd(6) do a[#a + 1] = words[rnd(#words)] end
    a[#a + 1] = cue[y]
    for _ = 1, rnd(4) do b[#b + 1] = words[rnd(#words)] end
    f:write(table.concat(a, " "), ",", table.concat(b, " "), ",", y - 1, "\n")
  end
  f:close()
end
LUA
"$HYDRA" run "$T/mk.lua" "$T"
"$HYDRA" data import text --split train="$T/train.csv" --split val="$T/val.csv" \
    --split test="$T/test.csv" --text-column a --pair-column b --label-column label \
    --from "$T/bert.h5" --out "$T/text.h5" >/dev/null

O="data.dir=$T data.id=text prune.calib_size=48"
"$HYDRA" prune "$T/bert.h5" --method taylor --members 2 --keep 2 --data "$T/text.h5" --quiet \
    --out "$T/gates.h5" $O >/dev/null
for m in 1 2; do
    "$HYDRA" finetune "$T/bert.h5" --gates "$T/gates.h5" --member $m --data "$T/text.h5" \
        --out "$T/m$m.h5" --quiet finetune.epochs=1 $O >/dev/null
    "$HYDRA" predict "$T/m$m.h5" --data "$T/text.h5" --split test --out "$T/p$m.h5" >/dev/null
done
"$HYDRA" fuse "$T/m1.h5" "$T/m2.h5" --mlp member --out "$T/fused.h5" >/dev/null
"$HYDRA" predict "$T/fused.h5" --data "$T/text.h5" --split test --out "$T/pf.h5" >/dev/null
"$HYDRA" info "$T/pf.h5" | grep -q "/member_probs *float32 \[2,40,3\]" || fail "fused predict"

cat >"$T/cmp.lua" <<'LUA'
local h5 = require("hydra.h5")
local d = arg[1]
local f <close> = h5.open(d .. "/pf.h5")
local mp = f:read("/member_probs")
local worst = 0
for m = 1, 2 do
  local g <close> = h5.open(d .. "/p" .. m .. ".h5")
  local p = g:read("/probs")
  for b = 1, p:size(1) do
    for k = 1, p:size(2) do
      worst = math.max(worst, math.abs(mp:get(m, b, k) - p:get(b, k)))
    end
  end
end
if not (worst <= 1e-5) then
  io.stderr:write(("fused member probabilities differ from the members' by %g\n"):format(worst))
  os.exit(1)
end
LUA
"$HYDRA" run "$T/cmp.lua" "$T" || fail "fused BERT != its members run one by one"

# the default fuse (averaged MLP) predicts and evaluates as well
"$HYDRA" fuse "$T/m1.h5" "$T/m2.h5" --out "$T/fused_avg.h5" >/dev/null
"$HYDRA" predict "$T/fused_avg.h5" --data "$T/text.h5" --split test --out "$T/pa.h5" >/dev/null
"$HYDRA" eval --id "$T/pa.h5" --out "$T/r.h5" >/dev/null

# export under HF names + the name map; deterministic bytes
for f in fused fused_avg; do
    "$HYDRA" export "$T/$f.h5" --format safetensors --out "$T/$f.safetensors" >/dev/null
done
"$HYDRA" export "$T/fused.h5" --format safetensors --out "$T/again.safetensors" >/dev/null
cmp -s "$T/fused.safetensors" "$T/again.safetensors" || fail "fused BERT export is not deterministic"
grep -q '"members.1.bert.encoder.layer.0.attention.self.query.weight":{"member":1,"rows":' \
    "$T/fused.name_map.json" || fail "fused BERT name map"
grep -q '"shared.bert.encoder.layer.1.intermediate.dense.weight":{"members":\[0,1\],"reduce":"mean"' \
    "$T/fused_avg.name_map.json" || fail "fused BERT name map of the averaged MLP"
set +e
"$HYDRA" export "$T/fused.h5" --format safetensors --names timm --out "$T/bad.safetensors" \
    2>"$T/err" >/dev/null
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "timm names exist for ViTs only" "$T/err" && [ ! -e "$T/bad.safetensors" ] ||
    fail "--names timm of a fused text model: exit $rc, $(cat "$T/err")"

# PyTorch rebuilds both from the files (only where /usr/bin/python3 has torch)
if /usr/bin/python3 -c "import torch, h5py" 2>/dev/null; then
    cat >"$T/inputs.lua" <<'LUA'
local h5 = require("hydra.h5")
local d, pred, out = arg[1], arg[2], arg[3]
local data <close> = h5.open(d .. "/text.h5")
local p <close> = h5.open(pred)
local g <close> = h5.create(out)
for _, k in ipairs({ "ids", "lengths", "type_ids" }) do g:write("/" .. k, data:read("/test/" .. k)) end
g:write("/member_probs", p:read("/member_probs"))
g:commit()
LUA
    "$HYDRA" run "$T/inputs.lua" "$T" "$T/pf.h5" "$T/check.h5"
    "$HYDRA" run "$T/inputs.lua" "$T" "$T/pa.h5" "$T/check_avg.h5"
    /usr/bin/python3 tests/ref/fused_reference.py "$T/fused.safetensors" \
        "$T/fused.name_map.json" --check "$T/check.h5" >/dev/null ||
        fail "PyTorch's rebuilt fused BERT differs from hydra's member probabilities"
    /usr/bin/python3 tests/ref/fused_reference.py "$T/fused_avg.safetensors" \
        "$T/fused_avg.name_map.json" --check "$T/check_avg.h5" >/dev/null ||
        fail "PyTorch's rebuilt fused BERT (averaged MLP) differs from hydra's"
fi
echo "fused_text ok"
