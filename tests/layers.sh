#!/bin/sh
# tests/layers.sh: checks the include direction of the C sources. core/ is in layer folders,
# lowest first: tensor < io < data < nn < eval < hydra; lua/bind/<layer>/ binds that layer.
#   1. A file of core/<layer>/ includes only headers of its own layer or a lower one, each named
#      with its folder ("nn/xfmr.h"), and never a Lua header (<lua.h>, <lauxlib.h>, <lualib.h>,
#      anything of lua/): core/ is a C library that knows nothing of its host.
#   2. A file of lua/bind/<layer>/ includes only core headers of its layer or a lower one, and
#      "bind.h" (the shared helpers of the binding, lua/bind/bind.h), which itself includes only
#      tensor/ headers, since the bindings of every layer include it.
#   3. No include circle: with a file pair x.c/x.h as one module, the modules of core/ and
#      lua/bind/ joined by their includes form no cycle.
# Every broken rule is printed as "file:line: #include ...: rule"; exits 1 when there is one.
# Run from the top of the tree (tests/run.sh does); prints "layers: N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
files=$(ls core/*/*.[ch] lua/bind/*.[ch] lua/bind/*/*.[ch] 2>/dev/null)
[ -n "$files" ] || { echo "tests/layers.sh: no sources under core/ and lua/bind/"; exit 1; }
# The list of files goes first (file "-"), so an include can be checked to name a real header.
printf '%s\n' $files | awk -v layers="tensor io data nn eval hydra" '
BEGIN {
    n = split(layers, L, " ")
    for (i = 1; i <= n; i++) rank[L[i]] = i
    bad = 0
}
# the lower layers of rank r, for the messages: "tensor, io, data"
function below(r,    s, i) {
    s = L[1]
    for (i = 2; i <= r; i++) s = s ", " L[i]
    return s
}
function fail(msg) {
    printf "%s:%d: #%s: %s\n", FILENAME, FNR, inc, msg
    bad++
}
# the module of a path: the path without its ending
function module(p) { sub(/\.[ch]$/, "", p); return p }
function edge(a, b) {
    if (a == b || (a SUBSEP b) in seen) return
    seen[a, b] = 1
    out[a] = out[a] " " b
    where[a, b] = FILENAME ":" FNR
    node[a] = 1; node[b] = 1
}
FILENAME == "-" { exists[$0] = 1; next }
/^[ \t]*#[ \t]*include/ {
    inc = $0
    sub(/^[ \t]*#[ \t]*/, "", inc)
    sub(/[ \t]*(\/[*\/].*)?$/, "", inc)
    split(FILENAME, part, "/")
    if (part[1] == "core") { zone = "core"; me = part[2] }
    else if (part[1] == "lua" && part[2] == "bind" && part[4] != "") { zone = "bind"; me = part[3] }
    else if (FILENAME == "lua/bind/bind.h") { zone = "bind"; me = L[1] }
    else { zone = "top"; me = "" }
    if (me != "" && !(me in rank)) {
        fail("the folder " me " is no layer (layers: " layers ")")
        next
    }
    target = inc
    sub(/^include[ \t]*/, "", target)
    system_hdr = (target ~ /^</)
    name = target
    gsub(/^[<"]|[>"]$/, "", name)
    if (zone == "core" && (name ~ /^(lua|lauxlib|lualib|luaconf)\.h$/ || name ~ /^lua\// ||
                           name == "bind.h")) {
        fail("core/ must not include Lua headers (core is a C library; lua/ binds it)")
        next
    }
    if (system_hdr || target !~ /^"/) next   # <system.h>, or a macro (FT_FREETYPE_H)
    if (name == "bind.h") {
        if (zone == "core") next
        edge(module(FILENAME), "lua/bind/bind")
        next
    }
    split(name, np, "/")
    if (!(np[1] in rank) || np[3] != "") {
        fail("a project header is named with its layer folder, as in \"nn/xfmr.h\" (layers: " \
             layers ")")
        next
    }
    if (!(("core/" name) in exists)) {
        fail("no such header core/" name)
        next
    }
    if (FILENAME == "lua/bind/bind.h" && rank[np[1]] > rank[me])
        fail("lua/bind/bind.h is included by the bindings of every layer: it may include only " \
             me "/ headers (name the classes of higher layers with a typedef)")
    else if (zone != "top" && rank[np[1]] > rank[me])
        fail((zone == "core" ? "core/" : "lua/bind/") me "/ may include only " below(rank[me]) \
             " (layer " np[1] " is above " me ")")
    edge(module(FILENAME), "core/" module(name))
}
# depth-first search; state 1 = on the path, 2 = done
function dfs(v,    k, m, list, w, i, c) {
    state[v] = 1
    path[++depth] = v
    m = split(out[v], list, " ")
    for (k = 1; k <= m; k++) {
        w = list[k]
        if (state[w] == 1) {
            c = ""
            for (i = depth; i >= 1 && path[i] != w; i--) ;
            for (; i <= depth; i++)
                c = c path[i] " (" where[path[i], i < depth ? path[i + 1] : w] ") -> "
            printf "include circle: %s%s\n", c, w
            bad++
        } else if (state[w] == 0)
            dfs(w)
    }
    depth--
    state[v] = 2
}
END {
    depth = 0
    for (v in node) if (state[v] == 0) dfs(v)
    if (bad) {
        printf "tests/layers.sh: %d include rule(s) broken (layers, lowest first: %s)\n", bad, layers
        print "layers: 0 passed, 1 failed"
        exit 1
    }
    print "layers: 1 passed, 0 failed"
}' - $files
