#!/bin/sh
# tests/e2e/unitab_fresh.sh: core/data/unitab.c is what tools/gen_unitab.py makes from the
# installed Debian unicode-data (a hand edit, or a changed generator not rerun, fails here).
# Skips (77) without python3 or unicode-data.
set -eu
PY=/usr/bin/python3
if [ ! -x "$PY" ] || [ ! -f /usr/share/unicode/UnicodeData.txt ]; then
    echo "python3 or unicode-data not installed"
    exit 77
fi
tmp=$(mktemp "${TMPDIR:-/tmp}/hydra-unitab-XXXXXX")
trap 'rm -f "$tmp"' EXIT
"$PY" tools/gen_unitab.py >"$tmp"
if ! cmp -s "$tmp" core/data/unitab.c; then
    echo "core/data/unitab.c differs from tools/gen_unitab.py's output (rerun it):"
    diff "$tmp" core/data/unitab.c | head -n 5
    exit 1
fi
echo "unitab_fresh: ok"
