#!/bin/sh
# tests/e2e/hydraize.sh: `hydra hydraize` end to end (ecosystem_2 §6.1, §7 T11) on the tiny timm
# ViT of tests/ref/import (img 32, patch 8, D 32, 4 heads, 2 blocks, 10 classes) as a timm folder,
# a second checkpoint of it (the F16 file) for Deep Ensembles, an ImageFolder ID tree of
# grey PNG textures (10 classes; train/val/test), a near-OOD ImageFolder and a far-OOD CIFAR-10
# binary folder, all imported with the model's preprocessing. Checks: every file of the run
# folder, result.md's metrics (numbers for every method and every member), the gates, the
# exports (a member re-imports with its kept heads), a rerun (nothing to do; --force: every
# stage a cache hit), the same run through `hydra exp configs/experiments/hydraize.yaml` (and a
# -m sweep of it), and bad inputs (one-line errors, exit 1, no folder written).
set -eu
. tests/e2e/tiny.inc
tiny_setup hydraize
R=tests/ref/import
mkdir -p "$tmp/timm" "$tmp/timm2"
cp "$R/timm_vit_f32.safetensors" "$tmp/timm/model.safetensors"
cp "$R/timm_vit_config.json" "$tmp/timm/config.json"
cp "$R/timm_vit_f16.safetensors" "$tmp/timm2/model.safetensors"
cp "$R/timm_vit_config.json" "$tmp/timm2/config.json"

cat >"$tmp/mkdata.lua" <<'LUA'
-- arg[1]: folder. ImageFolder trees of 32x32 grey PNGs (each class a texture, hy_synth_images)
-- and a CIFAR-10 binary folder of 20 test records.
local core = require("hydra.core")
local root = arg[1]
local tree = require("hydra.model").write_image_folder
tree(root .. "/imgs", 10, 1, { { "train", 100 }, { "val", 40 }, { "test", 40 } })
tree(root .. "/near", 3, 7, { { "test", 30 } })
tree(root .. "/oodval", 3, 11, { { "val", 30 } })
core.mkdir_p(root .. "/cifar")
local function rec(label, r)
  local px = {}
  for j = 0, 3071 do px[#px + 1] = string.char((r * 37 + j * (r + 3)) % 256) end
  return string.char(label) .. table.concat(px)
end
local function write(name, n)
  local f = assert(io.open(root .. "/cifar/" .. name, "wb"))
  for r = 1, n do f:write(rec(r % 10, r)) end
  f:close()
end
for b = 1, 5 do write("data_batch_" .. b .. ".bin", 1) end
write("test_batch.bin", 20)
LUA
"$HYDRA" run "$tmp/mkdata.lua" "$tmp" || fail "cannot write the data"

out=$tmp/out
run_hydraize() {
    "$HYDRA" hydraize "$tmp/timm" --data "$tmp/imgs" --near synth="$tmp/near" \
        --ood cifar="$tmp/cifar" --members 2 --keep 2 --base-epochs 1 --epochs 1 \
        --deep-ensemble "$tmp/timm2" --out "$out" --no-progress "$@"
}
run_hydraize >"$tmp/run1.txt" 2>&1 || { cat "$tmp/run1.txt"; fail "hydraize failed"; }

# ===== the run folder =====
for f in base.h5 gates.h5 member_1.h5 member_2.h5 fused.h5 result.h5 result.md table.md \
         config.resolved.yaml overrides.yaml log.txt plots/reliability.png plots/ood-hist.png \
         export/base.safetensors export/member_1.safetensors export/member_2.safetensors \
         export/fused.safetensors export/fused.name_map.json; do
    [ -s "$out/$f" ] || fail "$out/$f is missing"
done
for m in single mc_dropout deep_ensemble hydra_taylor; do
    for s in imgs synth cifar; do
        [ -s "$out/preds/$m/$s.h5" ] || fail "preds/$m/$s.h5 is missing"
    done
done
[ -s "$out/preds/hydra_taylor/member_2/cifar.h5" ] || fail "member predictions are missing"
grep -q "fine-tuning the imported model" "$out/log.txt" || fail "the base was not fine-tuned"
grep -q "^- model.from=" "$out/overrides.yaml" || fail "overrides.yaml lacks model.from"
grep -q "^  from: .*timm" "$out/config.resolved.yaml" || fail "config.resolved.yaml lacks model.from"

# result.md: every method and member row has a number in each headline column
awk -F'|' -v fail=0 '
    /^\| Method / && !hdr { hdr = 1; for (i = 2; i < NF; i++) { gsub(/^ +| +$/, "", $i); col[$i] = i }; next }
    hdr && /^\|---/ { next }
    hdr && /^\| / {
        gsub(/^ +| +$/, "", $2); rows[$2] = 1
        n = split("Acc ↑|ECE ↓|NLL ↓|Brier ↓|Near avg AUROC ↑|Near avg FPR95 ↓|Far avg AUROC ↑|Far avg FPR95 ↓", want, "|")
        for (k = 1; k <= n; k++) {
            if (!(want[k] in col)) { print "no column " want[k]; fail = 1; continue }
            v = $(col[want[k]]); gsub(/ /, "", v)
            if (v !~ /^[0-9]+\.[0-9]+$/) { print $2 ": " want[k] " is \"" v "\""; fail = 1 }
        }
        next
    }
    hdr && !/^\| / { exit }
    END {
        split("Single|MC Dropout|Deep Ensembles|Hydra (Taylor)|Hydra (Taylor) member 1|Hydra (Taylor) member 2", need, "|")
        for (k in need) if (!(need[k] in rows)) { print "no row " need[k]; fail = 1 }
        exit fail
    }' "$out/result.md" || fail "result.md lacks metrics (above)"

# the gates: 2 members, 2 of 4 heads per layer each; a member export re-imports with them
cat >"$tmp/gates.lua" <<'LUA'
local h5 = require("hydra.h5")
local f <close> = h5.open(arg[1])
local g = f:read("/gates", "float32"):totable()
assert(#g == 2, "members: " .. #g)
for m = 1, 2 do
  for l = 1, 2 do
    local kept = 0
    for h = 1, 4 do kept = kept + g[m][l][h] end
    assert(kept == 2, ("member %d layer %d keeps %g heads"):format(m, l, kept))
  end
end
LUA
"$HYDRA" run "$tmp/gates.lua" "$out/gates.h5" || fail "gates.h5 is not 2 members x 2 heads"
"$HYDRA" import "$out/export/member_1.safetensors" --format timm-vit --out "$tmp/m1.h5" \
    >/dev/null || fail "export/member_1.safetensors does not import"

# ===== reruns: nothing to do; --force reuses every stage; hydra exp is the same run =====
run_hydraize >"$tmp/run2.txt" 2>&1 || { cat "$tmp/run2.txt"; fail "rerun failed"; }
grep -q "is complete: .*nothing to do" "$tmp/run2.txt" || { cat "$tmp/run2.txt"; fail "rerun did work"; }
run_hydraize --force >"$tmp/run3.txt" 2>&1 || { cat "$tmp/run3.txt"; fail "--force failed"; }
grep -q "stages reused, 0 built" "$tmp/run3.txt" || { cat "$tmp/run3.txt"; fail "--force built stages"; }
if grep -q "cache miss" "$tmp/run3.txt"; then fail "--force rerun has a cache miss"; fi
id=$(sed -n 's/^run \([0-9a-f]*\): .*stages reused.*/\1/p' "$tmp/run3.txt")
[ -n "$id" ] || fail "no run id in the output"
line=$(grep "^hydra exp " "$tmp/run1.txt") || fail "hydraize did not print its hydra exp line"
eval "\"\$HYDRA\" exp ${line#hydra exp } results_dir=\"\$tmp/res\" --no-progress" \
    >"$tmp/exp.txt" 2>&1 || { cat "$tmp/exp.txt"; fail "hydra exp of the same overrides failed"; }
grep -q "run $id complete .*, 0 built)" "$tmp/exp.txt" || { tail -3 "$tmp/exp.txt"; fail "hydra exp is not the same run $id"; }
# -m: a sweep of the same config (two MC Dropout sample counts: only those predictions are new)
eval "\"\$HYDRA\" exp ${line#hydra exp } -m mc_dropout.samples=4,8 results_dir=\"\$tmp/res\"" \
    >"$tmp/mr.txt" 2>&1 || { cat "$tmp/mr.txt"; fail "hydra exp -m failed"; }
grep -q "2 of 2 points complete" "$tmp/mr.txt" || { cat "$tmp/mr.txt"; fail "the multirun did not complete"; }
[ -s "$tmp/res/hydraize/report/table.md" ] || fail "the multirun wrote no report"

# ===== circuits: --method circuit with an OOD validation tree (its val split) =====
"$HYDRA" hydraize "$tmp/timm" --data "$tmp/imgs" --ood cifar="$tmp/cifar" --members 2 --keep 2 \
    --method circuit --ood-val "$tmp/oodval" --export none --out "$tmp/circ" --no-progress \
    >"$tmp/circ.txt" 2>&1 || { tail -5 "$tmp/circ.txt"; fail "--method circuit failed"; }
grep -q "^| Hydra (Circ) member 2 | [0-9]" "$tmp/circ/result.md" || fail "no Hydra (Circ) members in result.md"
[ ! -e "$tmp/circ/export" ] || fail "--export none wrote export/"

# ===== bad inputs: one line on stderr naming the file or key, exit 1, no --out folder =====
bad() {   # bad PATTERN ARGS...
    pat=$1; shift
    rm -rf "$tmp/bad"
    if "$HYDRA" hydraize "$@" --members 2 --out "$tmp/bad" --quiet >"$tmp/bad.out" 2>"$tmp/bad.err"; then
        fail "accepted: $*"
    fi
    [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] || { cat "$tmp/bad.err"; fail "not one line: $*"; }
    grep -q -- "$pat" "$tmp/bad.err" || { cat "$tmp/bad.err"; fail "expected '$pat': $*"; }
    [ ! -e "$tmp/bad" ] || fail "a folder was written: $*"
}
bad "model.from '$tmp/nope': no such file or folder" "$tmp/nope" --data "$tmp/imgs"
bad "is a bare .safetensors file: set import.format" "$tmp/timm/model.safetensors" --data "$tmp/imgs"
bad "has 1x28x28 images .*takes 3x32x32" "$tmp/timm" --data "$tmp/data/tiny.h5"
bad "data 'x' .*has 1x28x28 images" "$tmp/timm" --data "$tmp/imgs" --ood x="$tmp/data/tinyood.h5"
bad "has 10 classes, the model '$tmp/timm' 3" "$tmp/timm" --data "$tmp/imgs" --classes 3 --base-epochs 1
bad "import.classes 3 replaces the classifier .*--base-epochs" "$tmp/timm" --data "$tmp/near" --classes 3
bad "data 'near' .*has no 'train' split" "$tmp/timm" --data "$tmp/near"
bad "data.sources.nodata '$tmp/nodata': no such file or folder" "$tmp/timm" --data "$tmp/nodata"
bad "data.ood_val is not set" "$tmp/timm" --data "$tmp/imgs" --method circuit
bad "data 'near' .*has no 'val' split: the circuit search" "$tmp/timm" --data "$tmp/imgs" --method circuit --ood-val "$tmp/near"
echo "hydraize: ok"
