#!/bin/sh
# tests/e2e/no_history.sh: the project's text describes the project as it is; its history lives
# in `git log`. Scans every tracked *.md file (whole text) and the comments of every tracked
# code file (.c .h: /* */ and // comments; .lua: -- comments and --[[ ]] blocks; .sh .py .yaml
# and Makefile: # comments) for the wording of a diary, and prints file:line: text of each hit.
# Exit 0: no hit; 1: hits; 77 (skip): not a git checkout.
#
# The patterns are bounded to wording that only a narrative uses:
#   - calendar dates (2026-12-04, 2026-12-01/02): a date is when something happened;
#   - "session(s)", "where it stands", "Nth turn / session / run", "first ... tenth session";
#   - "we / I / was / were / been / then / also tried", "tried and", "tried on", "tried before";
#   - "last time", "today('s)", "yesterday", "earlier / previous / last run(s)", "the previous
#     version", "before / after / until / since this change", "and reverted", "(was|were)
#     reverted", "not landed";
#   - a commit named as a point in time: "commit / binary of / main at / code of / until /
#     since <7-10 hex digits>".
# Left alone on purpose: "tried" as a count (bad_inputs.sh: "inputs tried"), "turn off", "in
# turn", "earlier run-ids" (an identifier), "used to <verb>" (a purpose), hex digests.
# Allowed dates: data, not history, listed one by one with the file they belong to:
#   datasets/SOURCES.md, datasets/fashion-mnist.lua: 2020-06-05 (the MTIME Debian's build wrote
#   into the Fashion-MNIST gzip headers) and 2017-08-31 (the upstream MTIME the recipe restores).
# This script itself is not scanned (its comments quote the patterns).
cd "$(dirname "$0")/../.." || exit 1
# the tracked files are git's list: outside a git checkout there is nothing to scan (skip)
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "no_history: not a git checkout"; exit 77
fi

PAT='\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b'
PAT="$PAT|\\bsessions?\\b|where it stands"
PAT="$PAT|\\b[0-9]+(st|nd|rd|th) (turn|session|run)s?\\b"
PAT="$PAT|\\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth) (turn|session)s?\\b"
PAT="$PAT|\\b(we|i|was|were|been|then|also) tried\\b|\\btried (and|on|before)\\b"
PAT="$PAT|\\blast time\\b|\\btoday('s)?\\b|\\byesterday\\b"
PAT="$PAT|\\b(earlier|previous|last) runs?([^-a-z]|\$)|\\bthe previous version\\b"
PAT="$PAT|\\b(before|after|until|since) this change\\b"
PAT="$PAT|\\band reverted\\b|\\b(was|were) reverted\\b|\\bnot landed\\b"
PAT="$PAT|\\b(commit|binary of|main at|code of|until|since) [0-9a-f]{7,10}\\b"

# file:line:comment-text of every comment line of the code files
comments() {
    for f in $(git ls-files '*.c' '*.h'); do
        awk -v F="$f" '
        { s = $0; out = ""; i = 1; n = length(s)
          while (i <= n) {
              c = substr(s, i, 1); d = substr(s, i, 2)
              if (inc) { if (d == "*/") { inc = 0; i += 2; out = out " "; continue }
                         out = out c; i++; continue }
              if (instr) { if (c == "\\") { i += 2; continue }
                           if (c == q) instr = 0; i++; continue }
              if (d == "/*") { inc = 1; i += 2; continue }
              if (d == "//") { out = out substr(s, i + 2); break }
              if (c == "\"" || c == "'\''") { instr = 1; q = c }
              i++
          }
          instr = 0
          if (out ~ /[^ \t]/) print F ":" FNR ":" out }' "$f"
    done
    for f in $(git ls-files '*.lua'); do
        awk -v F="$f" '
        { s = $0
          if (inb) { p = index(s, "]]"); if (p) { inb = 0; s = substr(s, 1, p - 1) }
                     print F ":" FNR ":" s; next }
          p = index(s, "--")
          if (!p) next
          t = substr(s, p + 2)
          if (t ~ /^\[=*\[/) { if (index(t, "]]") == 0) inb = 1 }
          print F ":" FNR ":" t }' "$f"
    done
    for f in $(git ls-files '*.sh' '*.py' '*.yaml' 'Makefile' '*.mk'); do
        awk -v F="$f" '
        { p = match($0, /(^|[ \t])#/)
          if (p) print F ":" FNR ":" substr($0, p) }' "$f"
    done
}

# every line of the *.md files, then the comments; the allowed dates are blanked first (only in
# their own files), so another hit on the same line still counts
hits=$( { for f in $(git ls-files '*.md'); do awk -v F="$f" '{ print F ":" FNR ":" $0 }' "$f"; done
          comments; } | grep -v '^tests/e2e/no_history\.sh:' |
        sed -E '/^datasets\/(SOURCES\.md|fashion-mnist\.lua):/s/2020-06-05|2017-08-31/(date)/g' |
        grep -iE "$PAT")
if [ -n "$hits" ]; then
    printf '%s\n' "$hits"
    echo "no_history: $(printf '%s\n' "$hits" | wc -l) lines narrate history (dates, sessions," \
         "what was tried); the text must describe the project as it is"
    exit 1
fi
echo "no_history: no history wording in the tracked text and comments"
exit 0
