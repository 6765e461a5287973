#!/bin/sh
# tools/hydraize_big.sh DIR [vit|bert|both]: `hydra hydraize` at the sizes users import, for
# timing by hand (never part of make test: minutes of CPU and a few GB of memory per model).
# Builds in DIR, with Debian's python3-torch (/usr/bin/python3, tests/ref/make_import_ref.py):
#   vit   a ViT-S/16-224-shaped timm folder (22 M parameters, random weights, 1000 classes) and
#         ImageFolder trees of 32x32 PNG textures (10 classes: 200 train, 50 val, 50 test; a
#         near- and a far-OOD tree of 50), upsampled to 224 by the model's preprocessing; the
#         run gives it a fresh 10-class head (--classes 10 --base-epochs 1)
#   bert  a BERT-base-shaped HF folder (110 M, 12 layers, 768 wide, 2 labels, 30522 tokens) and
#         CSV files of random vocabulary words (200 train, 50 val, 50 test, 50 OOD), sequences
#         cut to 128 positions (import.max_len=128)
# then runs the pipeline (3 members keeping 4 heads per layer, 1 fine-tuning epoch each) under
# /usr/bin/time -v and prints the wall time and the peak resident memory of each run. The stage
# cache is DIR/cache, so a second call shows the all-cache-hits rerun.
set -eu
DIR=${1:?usage: tools/hydraize_big.sh DIR [vit|bert|both]}
WHAT=${2:-both}
HYDRA=${HYDRA:-./hydra}
case "$HYDRA" in /*) ;; *) HYDRA="$(pwd)/$HYDRA" ;; esac
export HYDRA_CACHE_DIR="$DIR/cache"
mkdir -p "$DIR"
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "hydraize_big: /usr/bin/time is missing (apt-get install time)"; exit 1; }

cat >"$DIR/mkdata.lua" <<'LUA'
local root, what = arg[1], arg[2]
if what == "vit" then
  local tree = require("hydra.model").write_image_folder
  tree(root .. "/imgs", 10, 1, { { "train", 200 }, { "val", 50 }, { "test", 50 } })
  tree(root .. "/near", 3, 7, { { "test", 50 } })
  tree(root .. "/far", 5, 9, { { "test", 50 } })
else
  local seed = 1
  local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n end
  local function csv(path, n, labels)
    local f = assert(io.open(path, "w"))
    f:write(labels and "text,label\n" or "text\n")
    for _ = 1, n do
      local words = {}
      for k = 1, 20 + rnd(80) do words[k] = "w" .. rnd(30000) end
      f:write(table.concat(words, " "), labels and ("," .. rnd(2)) or "", "\n")
    end
    f:close()
  end
  csv(root .. "/train.csv", 200, true)
  csv(root .. "/val.csv", 50, true)
  csv(root .. "/test.csv", 50, true)
  csv(root .. "/ood.csv", 50, false)
end
LUA

timed() {   # timed NAME CMD...: runs CMD, prints wall time and peak RSS
    name=$1; shift
    $TIME -v "$@" >"$DIR/$name.log" 2>"$DIR/$name.time" || { tail -5 "$DIR/$name.log"; cat "$DIR/$name.time"; exit 1; }
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$DIR/$name.time")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$DIR/$name.time")
    echo "$name: wall $wall, peak RSS $((rss / 1024)) MiB ($(grep -c 'cache hit' "$DIR/$name.log") stage hits; log $DIR/$name.log)"
}

if [ "$WHAT" = vit ] || [ "$WHAT" = both ]; then
    [ -s "$DIR/vit/model.safetensors" ] || /usr/bin/python3 tests/ref/make_import_ref.py big-timm "$DIR/vit"
    [ -d "$DIR/vitdata/imgs" ] || "$HYDRA" run "$DIR/mkdata.lua" "$DIR/vitdata" vit
    timed hydraize-vit-s "$HYDRA" hydraize "$DIR/vit" --data "$DIR/vitdata/imgs" \
        --near near="$DIR/vitdata/near" --ood far="$DIR/vitdata/far" --classes 10 --base-epochs 1 \
        --members 3 --keep 4 --epochs 1 --out "$DIR/out-vit" --no-progress --force
fi
if [ "$WHAT" = bert ] || [ "$WHAT" = both ]; then
    [ -s "$DIR/bert/model.safetensors" ] || /usr/bin/python3 tests/ref/make_import_ref.py big-bert "$DIR/bert"
    [ -s "$DIR/bertdata/train.csv" ] || { mkdir -p "$DIR/bertdata"; "$HYDRA" run "$DIR/mkdata.lua" "$DIR/bertdata" bert; }
    timed hydraize-bert-base "$HYDRA" hydraize "$DIR/bert" --data "$DIR/bertdata/train.csv" \
        --val "$DIR/bertdata/val.csv" --test "$DIR/bertdata/test.csv" \
        --ood ood="$DIR/bertdata/ood.csv" --members 3 --keep 4 --epochs 1 --out "$DIR/out-bert" \
        --no-progress --force import.max_len=128
fi
