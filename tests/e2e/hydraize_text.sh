#!/bin/sh
# tests/e2e/hydraize_text.sh: `hydra hydraize` end to end on the tiny Hugging Face BERT of
# tests/ref/import/hf_bert (post-LN, token types, tanh pooler; vocab 60, D 32, 4 heads, 2 layers,
# 3 labels), with its sharded copy (tests/ref/import/hf_bert_sharded) as
# the second Deep Ensembles member, on CSV files of sentences made of its vocabulary (train, val, test with
# labels 0-2; an OOD file without labels), tokenised with the model's WordPiece vocabulary and
# casing, one epoch of base fine-tuning. Checks: the run folder's files, result.md's metrics for
# every method and member, the exports, a rerun with every stage a cache hit, and bad inputs
# (text data for an image model, a text file split given to an ImageFolder ID set). The
# baselines run first on their own (methods=[single, mc_dropout, deep_ensemble]), then the whole
# pipeline with the fused post-LN members.
set -eu
. tests/e2e/tiny.inc
tiny_setup hydraize_text
B=tests/ref/import/hf_bert
DE=tests/ref/import/hf_bert_sharded

cat >"$tmp/mktext.lua" <<'LUA'
-- CSV files text,label: class 0 praise, 1 complaints, 2 about the film's parts
local words = { { "good", "great", "fun", "best", "love", "funny" },
                { "bad", "boring", "dull", "worst", "hate", "slow" },
                { "plot", "story", "music", "score", "acting", "film" } }
local filler = { "the", "movie", "was", "very", "really", "it", "this", "so", "quite" }
local seed = 1
local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end
local function write(path, n)
  local f = assert(io.open(path, "w"))
  f:write("text,label\n")
  for _ = 1, n do
    local c = rnd(3)
    local t = {}
    for j = 1, 3 + rnd(5) do t[j] = rnd(3) == 1 and words[c][rnd(6)] or filler[rnd(9)] end
    f:write(table.concat(t, " "), ",", c - 1, "\n")
  end
  f:close()
end
write(arg[1] .. "/train.csv", 90)
write(arg[1] .. "/val.csv", 30)
write(arg[1] .. "/test.csv", 30)
local f = assert(io.open(arg[1] .. "/ood.csv", "w"))
f:write("text\n")
for i = 1, 30 do f:write(("i ? ! . and but of to that%s\n"):format((" a"):rep(i % 4))) end
f:close()
LUA
"$HYDRA" run "$tmp/mktext.lua" "$tmp" || fail "cannot write the CSV files"

out=$tmp/out
run_hydraize() {
    "$HYDRA" hydraize "$B" --data "$tmp/train.csv" --val "$tmp/val.csv" --test "$tmp/test.csv" \
        --ood odd="$tmp/ood.csv" --members 2 --keep 2 --base-epochs 1 --epochs 1 \
        --deep-ensemble "$DE" --out "$out" --no-progress "$@"
}
# the baselines alone
out=$tmp/base
run_hydraize "methods=[single, mc_dropout, deep_ensemble]" >"$tmp/run0.txt" 2>&1 \
    || { tail -20 "$tmp/run0.txt"; fail "hydraize (baselines) failed"; }
for row in "Single" "MC Dropout" "Deep Ensembles"; do
    grep -q "^| $row | [0-9]" "$out/result.md" || fail "result.md of the baselines has no row '$row'"
done
[ -s "$out/export/base.safetensors" ] || fail "the baselines' run has no export/base.safetensors"
grep -q "data train: .*train.csv: 90 records -> /train" "$tmp/run0.txt" \
    || fail "the CSV files were not imported"
# the whole pipeline
out=$tmp/out
run_hydraize >"$tmp/run1.txt" 2>&1 || { tail -20 "$tmp/run1.txt"; fail "hydraize failed"; }

for f in base.h5 gates.h5 member_1.h5 member_2.h5 fused.h5 result.h5 result.md table.md \
         config.resolved.yaml overrides.yaml export/base.safetensors \
         export/member_1.safetensors export/member_2.safetensors export/fused.safetensors \
         export/fused.name_map.json preds/hydra_taylor/odd.h5 preds/hydra_taylor/member_1/train.h5; do
    [ -s "$out/$f" ] || fail "$out/$f is missing"
done
for row in "Single" "MC Dropout" "Deep Ensembles" "Hydra (Taylor)" "Hydra (Taylor) member 1" \
           "Hydra (Taylor) member 2"; do
    line=$(grep -F "| $row |" "$out/result.md" | head -1)
    [ -n "$line" ] || fail "result.md has no row '$row'"
    # Acc, ECE, ECE +TS, NLL: numbers
    echo "$line" | awk -F'|' '{ for (i = 3; i <= 6; i++) { v = $i; gsub(/ /, "", v); if (v !~ /^[0-9]+\.[0-9]+$/) exit 1 } }' \
        || fail "result.md row '$row' lacks numbers: $line"
done
"$HYDRA" import "$out/export/member_2.safetensors" --format hf-bert --vocab "$B/vocab.txt" \
    --out "$tmp/m2.h5" >/dev/null || fail "export/member_2.safetensors does not import"

run_hydraize --force >"$tmp/run2.txt" 2>&1 || { tail -20 "$tmp/run2.txt"; fail "--force failed"; }
grep -q "stages reused, 0 built" "$tmp/run2.txt" || { tail "$tmp/run2.txt"; fail "--force built stages"; }

# bad inputs: one line, exit 1, no folder
bad() {
    pat=$1; shift
    rm -rf "$tmp/bad"
    if "$HYDRA" hydraize "$@" --members 2 --out "$tmp/bad" --quiet >/dev/null 2>"$tmp/bad.err"; then
        fail "accepted: $*"
    fi
    [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] || { cat "$tmp/bad.err"; fail "not one line: $*"; }
    grep -q -- "$pat" "$tmp/bad.err" || { cat "$tmp/bad.err"; fail "expected '$pat': $*"; }
    [ ! -e "$tmp/bad" ] || fail "a folder was written: $*"
}
mkdir -p "$tmp/timm"
cp tests/ref/import/timm_vit_f32.safetensors "$tmp/timm/model.safetensors"
cp tests/ref/import/timm_vit_config.json "$tmp/timm/config.json"
bad "is a text set, the model '$tmp/timm' an image model" "$tmp/timm" --data "$tmp/train.csv" \
    --val "$tmp/val.csv" --test "$tmp/test.csv"
bad "has no 'val' split" "$B" --data "$tmp/train.csv"
bad "--val and --test take text files" "$B" --data "$tmp/timm" --val "$tmp/val.csv"
echo "hydraize_text: ok"
