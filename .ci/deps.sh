#!/bin/sh
# Installs the Debian packages hydra needs; does nothing for those already present.
# Usage: deps.sh PKG... -- EXTRACT_PKG...
# Packages after "--" are needed for a single file only: they are downloaded with
# `apt-get download` and unpacked with `dpkg-deb -x` into datasets/raw/debian/<pkg>/.
set -eu
install=""
extract=""
mode=install
for p in "$@"; do
    if [ "$p" = "--" ]; then mode=extract; continue; fi
    if [ $mode = install ]; then
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            install="$install $p"
    else
        [ -d "datasets/raw/debian/$p" ] || extract="$extract $p"
    fi
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [ -n "$install$extract" ]; then
    $SUDO apt-get update -qq
fi
if [ -n "$install" ]; then
    echo "deps: installing$install"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $install
else
    echo "deps: all Debian packages present"
fi
for p in $extract; do
    echo "deps: extracting $p into datasets/raw/debian/$p"
    tmp=$(mktemp -d)
    chmod 777 "$tmp"   # apt-get download runs as _apt and must be able to write here
    (cd "$tmp" && apt-get download -qq "$p")
    mkdir -p "datasets/raw/debian/$p.part"
    dpkg-deb -x "$tmp"/"$p"_*.deb "datasets/raw/debian/$p.part"
    rm -rf "$tmp"
    mv "datasets/raw/debian/$p.part" "datasets/raw/debian/$p"
done
