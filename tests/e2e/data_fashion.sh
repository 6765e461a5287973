#!/bin/sh
# tests/e2e/data_fashion.sh: prepares fashion-mnist (Debian dataset-fashion-mnist) into a temporary
# folder and checks: the test images are byte-identical to the idx file's pixel block, the labels
# match, the split sizes, /meta mean/std round to 0.2860/0.3530, and a small fashion-mnist-c
# (subset=200) has severities monotone in mean |pixel change| on real images. Skips (77)
# without the Debian package.
set -eu
HYDRA=${HYDRA:-./hydra}
DIR=/usr/share/datasets/fashion-mnist
if [ ! -f "$DIR/t10k-images-idx3-ubyte.gz" ]; then
    echo "dataset-fashion-mnist not installed (run make deps)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-data-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export HYDRA_PREPARED_DIR="$tmp/prepared"
"$HYDRA" data prepare fashion-mnist >/dev/null
"$HYDRA" data prepare fashion-mnist-c subset=200 >/dev/null
zcat "$DIR/t10k-images-idx3-ubyte.gz" | tail -c +17 >"$tmp/pixels.raw"
zcat "$DIR/t10k-labels-idx1-ubyte.gz" | tail -c +9 >"$tmp/labels.raw"
cat >"$tmp/check.lua" <<'LUA'
local core = require("hydra.core")
local h5 = require("hydra.h5")
local dir = ...
local tmp = arg[1]
local g <close> = h5.open(os.getenv("HYDRA_PREPARED_DIR") .. "/fashion-mnist.h5")
local test = g:read("/test/images")
-- write the prepared test images as an idx and compare its pixel block with the original's
core.idx_write(tmp .. "/prepared.idx", test)
local f = assert(io.open(tmp .. "/prepared.idx", "rb"))
local mine = f:read("a"):sub(17)
f:close()
f = assert(io.open(tmp .. "/pixels.raw", "rb"))
local orig = f:read("a")
f:close()
assert(#orig == 7840000, "original pixel block has " .. #orig .. " bytes")
assert(mine == orig, "prepared test images differ from the Debian idx pixels")
local lab = g:read("/test/labels")
f = assert(io.open(tmp .. "/labels.raw", "rb"))
local ol = f:read("a")
f:close()
for _, i in ipairs({ 1, 2, 777, 10000 }) do
  assert(lab:get(i) == ol:byte(i), "label " .. i)
end
assert(g:read("/train/images"):size(1) == 55000, "train size")
assert(g:read("/val/labels"):size(1) == 5000, "val size")
local mean, std = g:attr("/meta", "mean"), g:attr("/meta", "std")
assert(("%.4f"):format(mean) == "0.2860", "mean " .. mean)
assert(("%.4f"):format(std) == "0.3530", "std " .. std)
local c <close> = h5.open(os.getenv("HYDRA_PREPARED_DIR") .. "/fashion-mnist-c.h5")
local rows = c:read("/test_rows")
local clean = core.sample_gather(test, rows)
local n = clean:numel()
for _, name in ipairs(core.corruptions()) do
  local prev = 0
  for s = 1, 5 do
    local im = c:read(("/%s/%d/images"):format(name.name, s))
    local d = 0
    local a, b = clean:flat(), im:flat()
    for i = 1, n, 7 do d = d + math.abs(a[i] - b[i]) end
    assert(d > prev, ("%s: severity %d changes pixels less than severity %d"):format(name.name, s, s - 1))
    prev = d
  end
end
print("ok")
LUA
HYDRA_PREPARED_DIR="$tmp/prepared" "$HYDRA" run "$tmp/check.lua" "$tmp"
