#!/bin/sh
# tests/e2e/ens_quick.sh: `hydra exp` runs Single, BatchEnsemble and LoRA-Ensemble (core/hydra/ens.h)
# end to end on a tiny synthetic configuration (a 2-layer ViT on generated textures, a few
# training steps each), then checks: one table row per method, the ensembles' predictions carry
# /member_probs [M,N,C] whose members differ, their checkpoints hold /ensemble and the members'
# tensors (`hydra info`), LoRA-Ensemble reuses the Single's base stage and keeps its backbone
# bit-identical, and a checkpoint of the wrong kind as LoRA backbone is a one-line error.
# Exit 77 (skip) when gnuplot is not installed (the run's plots need it).
set -u
HYDRA=${HYDRA:-./hydra}
command -v gnuplot >/dev/null 2>&1 || { echo "gnuplot is not installed (make deps)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data"

cat > "$tmp/mk.lua" <<'LUA'
local hydra = require("hydra")
local d = arg[1]
hydra.model.write_synthetic(d .. "/tiny.h5", { train = 128, val = 32, test = 48, seed = 3 })
hydra.model.write_synthetic(d .. "/synood.h5", { train = 8, val = 8, test = 32, seed = 8,
                                                  classes = 4 })
LUA
"$HYDRA" run "$tmp/mk.lua" "$tmp/data" || exit 1

METHODS=${ENS_METHODS:-"single, batch_ensemble, lora_ensemble"}
cat > "$tmp/exp.yaml" <<EOF2
include: $PWD/configs/data/tiny.yaml
experiment: e2e_ens
results_dir: $tmp/results
methods: [$METHODS]
model: { d_model: 16, n_heads: 4, depth: 2, d_mlp: 32 }
data:
  dir: $tmp/data
  ood: [synood]
  shift: []
train: { epochs: 1, batch_size: 32, eval_batch_size: 32 }
finetune: { epochs: 1, learning_rate: 3.0e-3 }
batch_ensemble: { members: 2 }
lora_ensemble: { members: 3, rank: 2, targets: "q,v,mlp" }
EOF2
HYDRA_CACHE_DIR="$tmp/cache" "$HYDRA" exp "$tmp/exp.yaml" --no-progress >"$tmp/out.txt" 2>&1 \
    || { cat "$tmp/out.txt"; exit 1; }
dir=$(sed -n 's/^results: *//p' "$tmp/out.txt")
[ -n "$dir" ] && [ -f "$dir/result.h5" ] || { cat "$tmp/out.txt"; echo "no result.h5"; exit 1; }
fail=0
for label in "Single" "BatchEnsemble" "LoRA-Ensemble"; do
    case "$METHODS" in *batch*) ;; *) [ "$label" = BatchEnsemble ] && continue ;; esac
    case "$METHODS" in *lora*) ;; *) [ "$label" = LoRA-Ensemble ] && continue ;; esac
    grep -q "^| $label |" "$dir/table.md" || { echo "table.md: no row '$label'"; fail=1; }
done

cat > "$tmp/check.lua" <<'LUA'
local hydra = require("hydra")
local core = hydra.core
local cache, data, methods = arg[1], arg[2], arg[3]
local function one(stage)
  local path
  for _, e in ipairs(core.listdir(cache .. "/" .. stage)) do
    if e:match("%.h5$") then path = cache .. "/" .. stage .. "/" .. e end
  end
  assert(path, "no " .. stage .. " checkpoint in the cache")
  return path
end
local function check_members(path, M)
  local m = hydra.model.load(path)
  local e = m:ensemble()
  assert(e and e.members == M, path .. ": /ensemble members")
  local p = m:predict(data .. "/tiny.h5", "test", { batch_size = 16 })
  assert(p.member_probs:size(1) == M and p.member_probs:size(2) == 48, "member_probs [M,N,C]")
  local t = p.member_probs:totable()
  local d = 0
  for i = 1, 48 do
    for c = 1, #t[1][i] do d = math.max(d, math.abs(t[1][i][c] - t[2][i][c])) end
  end
  assert(d > 1e-3, path .. ": members 1 and 2 predict the same (max diff " .. d .. ")")
  print(("%s: %d members, max |p1 - p2| %.3f"):format(e.method, M, d))
  return m
end
if methods:find("batch") then check_members(one("batch_ensemble"), 2) end
if methods:find("lora") then
  local m = check_members(one("lora_ensemble"), 3)
  local base = hydra.model.load(one("base"))
  local a, b = base:get_params(), m:get_params()
  local n = a:size(1)
  local ta, tb = a:totable(), core.sample_slice(b, 1, n):totable()
  for i = 1, n do assert(ta[i] == tb[i], "the LoRA backbone differs from the Single at " .. i) end
  print("lora_ensemble: backbone bit-identical to the Single")
  if methods:find("batch") then   -- an ensemble as backbone: a one-line error
    local be = hydra.model.load(one("batch_ensemble"))
    local ok, e = pcall(m.ud.copy_backbone, m.ud, be.ud)
    assert(not ok and tostring(e):find("the backbone must be a single model, not a "
      .. "batch_ensemble model", 1, true), "wrong-kind backbone: " .. tostring(e))
    print("lora_ensemble: " .. tostring(e))
  end
end
LUA
"$HYDRA" run "$tmp/check.lua" "$tmp/cache" "$tmp/data" "$METHODS" || fail=1
case "$METHODS" in *batch*)
    be=$(ls "$tmp"/cache/batch_ensemble/*.h5 | head -n 1)
    "$HYDRA" info "$be" >"$tmp/info.txt" 2>&1 || { cat "$tmp/info.txt"; fail=1; }
    grep -q "ensemble" "$tmp/info.txt" || { echo "hydra info: no /ensemble"; fail=1; }
    grep -q "be_s" "$tmp/info.txt" || { echo "hydra info: no member tensors"; fail=1; }
    ;;
esac
case "$METHODS" in *lora*)
    lo=$(ls "$tmp"/cache/lora_ensemble/*.h5 | head -n 1)
    "$HYDRA" info "$lo" >"$tmp/info.txt" 2>&1 || { cat "$tmp/info.txt"; fail=1; }
    grep -q "lora_a" "$tmp/info.txt" || { echo "hydra info: no adapters"; fail=1; }
    grep -q "stage base [0-9a-f]*: cache hit" "$dir/log.txt" \
        || { echo "LoRA-Ensemble did not reuse the Single's base stage"; fail=1; }
    ;;
esac
case "$METHODS" in *lora*)   # a bad knob: one line naming the key, no traceback
    HYDRA_CACHE_DIR="$tmp/cache" "$HYDRA" exp "$tmp/exp.yaml" --no-progress \
        lora_ensemble.targets=q,x >"$tmp/bad.txt" 2>&1 && { echo "bad targets accepted"; fail=1; }
    grep -q "lora_ensemble.targets: 'x' is not one of q, k, v, o, mlp" "$tmp/bad.txt" \
        || { cat "$tmp/bad.txt"; echo "no message naming lora_ensemble.targets"; fail=1; }
    grep -q "traceback" "$tmp/bad.txt" && { cat "$tmp/bad.txt"; echo "a traceback"; fail=1; }
    ;;
esac
[ $fail -eq 0 ] || { cat "$tmp/out.txt"; exit 1; }
echo "ens_quick: $METHODS: table, member predictions, checkpoints in $dir"
