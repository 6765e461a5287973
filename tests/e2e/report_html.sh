#!/bin/sh
# tests/e2e/report_html.sh: `hydra report EXPERIMENT --html` and `hydra exp ... --html` give one
# self-contained page, checked in headless Chromium: every image decodes, the main table has a
# row per method and configuration with the best entry of a column in bold, no file or host is
# referenced (every src is a data: URI; no link, import or url()), and a results_dir holding
# <script> and quotes shows as text (the page has no script element of its own). Skips (77)
# where Chromium is not installed (make deps installs it).
set -u
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "chromium is not installed (apt-get install chromium)"; exit 77; }
. "$(dirname "$0")/tiny.inc"
tiny_setup html
res="$tmp/r<script>alert('x')<\/script>\"q"
cat > "$tmp/tiny.yaml" <<EOF
include: $HOME_DIR/configs/experiments/quick.yaml
experiment: html
data: {id: tiny, ood: [tinyood], shift: [], dir: $tmp/data, train_subset: 0, test_subset: 0}
train: {epochs: 1, batch_size: 32, eval_batch_size: 64}
prune: {calib_size: 64, val_size: 32}
finetune: {epochs: 0}
methods: [single, hydra_taylor]
EOF
"$HYDRA" exp "$tmp/tiny.yaml" -m seed=0,1 hydra.members=2,3 "results_dir=$res" --jobs 2 \
    --threads 2 > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; fail "the runs failed"; }
"$HYDRA" report "$res/html" --html > "$tmp/report.log" 2>&1 || { cat "$tmp/report.log"; fail "hydra report --html failed"; }
page="$res/html/report/report.html"
[ -s "$page" ] || fail "no report.html"
# one run's own page
one=$(ls -d "$res"/html/*/ | grep -v -e /report/ -e /multirun/ | head -n 1)
"$HYDRA" exp "$tmp/tiny.yaml" seed=0 hydra.members=2 "results_dir=$res" --html > "$tmp/one.log" 2>&1 \
    || { cat "$tmp/one.log"; fail "hydra exp --html failed"; }
grep -q "report: .*report.html" "$tmp/one.log" || { cat "$tmp/one.log"; fail "exp --html printed no report"; }

# static: nothing outside the file
if grep -Eo '(src|href)="[^"]*"' "$page" | grep -v '^src="data:image/png;base64,' | grep -q .; then
    grep -Eo '(src|href)="[^"]{0,60}' "$page" | grep -v 'data:image/png' | head; fail "a src/href that is not a data: URI"
fi
if grep -Eiq '<link|@import|url\(|<iframe|<object|<embed' "$page"; then fail "the page references another resource"; fi
grep -q '&lt;script&gt;alert' "$page" || fail "the <script> of results_dir is not shown escaped"

# in Chromium: images decoded, rows, bold best, no script of the page's own
cp "$page" "$tmp/check.html"
cat >> "$tmp/check.html" <<'EOS'
<script>
window.addEventListener("load", function () {
  var imgs = document.images, bad = 0;
  for (var i = 0; i < imgs.length; i++) if (!imgs[i].complete || imgs[i].naturalWidth === 0) bad++;
  var t = document.querySelector("table");
  var rows = t ? t.tBodies[0].rows.length : -1;
  var bold = t ? t.querySelectorAll("td b").length : -1;
  var scripts = document.querySelectorAll("script").length;
  var out = document.createElement("pre");
  out.id = "hydra-check";
  out.textContent = "CHECK images=" + imgs.length + " broken=" + bad + " rows=" + rows +
    " bold=" + bold + " scripts=" + scripts + " END";
  document.body.appendChild(out);
});
</script>
EOS
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-extensions \
    --no-first-run --host-resolver-rules="MAP * ~NOTFOUND" --virtual-time-budget=10000 \
    --dump-dom "file://$tmp/check.html" > "$tmp/dom.html" 2> "$tmp/chromium.log" \
    || { tail -n 5 "$tmp/chromium.log"; fail "chromium --dump-dom failed"; }
line=$(grep -o 'CHECK [^E]*END' "$tmp/dom.html")
[ -n "$line" ] || { tail -n 5 "$tmp/chromium.log"; fail "the check script did not run"; }
echo "report_html: $line"
imgs=$(echo "$line" | sed -E 's/.*images=([0-9]+).*/\1/')
broken=$(echo "$line" | sed -E 's/.*broken=([0-9]+).*/\1/')
rows=$(echo "$line" | sed -E 's/.*rows=([0-9]+).*/\1/')
bold=$(echo "$line" | sed -E 's/.*bold=([0-9]+).*/\1/')
scripts=$(echo "$line" | sed -E 's/.*scripts=([0-9]+).*/\1/')
[ "$imgs" -ge 10 ] || fail "expected >= 10 images (3 per run + ablation plots), got $imgs"
[ "$broken" -eq 0 ] || fail "$broken images did not decode"
[ "$rows" -eq 4 ] || fail "the main table has $rows rows, expected 4 (2 methods x 2 member counts)"
[ "$bold" -ge 1 ] || fail "no best entry in bold"
[ "$scripts" -eq 1 ] || fail "the page has $scripts script elements (expected only the test's)"
cp "$page" "$tmp/page.html"   # (the folder's name would need URL escapes)
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --host-resolver-rules="MAP * ~NOTFOUND" --window-size=1280,1600 \
    --screenshot="$tmp/shot.png" "file://$tmp/page.html" > /dev/null 2>&1 || fail "chromium --screenshot failed"
[ -s "$tmp/shot.png" ] || fail "no screenshot"
echo "report_html: ok"
