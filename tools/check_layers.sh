#!/bin/sh
# Checks the include direction of DESIGN.md section 2 on every source under src/:
#   api -> core -> {algo, bootstrap} -> transport -> {reduce, device, util}
# A folder may include its own headers and those of folders below it; folders on one level
# (algo and bootstrap; reduce and device) do not include each other, and util, at the bottom,
# includes only util. Only quoted includes of the form "folder/..." are layer references;
# <system> headers and the public "nccl.h"/"tutti.h" are free for all.
# Prints file:line for each violation and exits 1 when there are any.
# Usage: tools/check_layers.sh [src-dir]   (default: the src/ next to this script)
set -eu

src=${1:-$(dirname "$0")/../src}
if [ ! -d "$src" ]; then
    echo "check_layers: $src is not a directory" >&2
    exit 2
fi

# What each folder may include (besides itself). Keep in step with DESIGN.md section 2.
allowed() {
    case $1 in
        api)       echo "core algo bootstrap transport reduce device util" ;;
        core)      echo "algo bootstrap transport reduce device util" ;;
        algo)      echo "transport reduce device util" ;;
        bootstrap) echo "transport reduce device util" ;;
        transport) echo "reduce device util" ;;
        reduce)    echo "util" ;;
        device)    echo "util" ;;
        util)      echo "" ;;
        *)         return 1 ;;
    esac
}
layers="api core algo bootstrap transport reduce device util"

bad=0
report() {
    echo "check_layers: $1" >&2
    bad=1
}

# Every top-level folder of src/ must be a known layer.
for dir in "$src"/*/; do
    [ -d "$dir" ] || continue
    name=$(basename "$dir")
    allowed "$name" >/dev/null || report "src/$name/ is not a layer of DESIGN.md (add it here)"
done

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# One line per include: path:line:folder, for '#include "folder/..."' (spaces allowed).
find "$src" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) |
    sort |
    while read -r file; do
        grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[A-Za-z0-9_]+/' "$file" |
            sed -E "s|^([0-9]+):.*\"([A-Za-z0-9_]+)/.*|$file:\1:\2|"
    done >"$tmp"

while IFS=: read -r file line target; do
    rel=${file#"$src"/}
    from=${rel%%/*}
    if [ "$from" = "$rel" ]; then
        report "src/$rel:$line: file outside any layer folder includes $target/"
        continue
    fi
    [ "$from" = "$target" ] && continue
    case " $layers " in
        *" $target "*) ;;
        *) continue ;; # not a layer: a path relative to the including folder
    esac
    ok=$(allowed "$from" || true)
    case " $ok " in
        *" $target "*) ;;
        *) report "src/$rel:$line: $from/ includes $target/ (allowed: ${ok:-only $from/})" ;;
    esac
done <"$tmp"

if [ $bad -ne 0 ]; then
    exit 1
fi
echo "check_layers: $(wc -l <"$tmp") layer includes under $src follow DESIGN.md"
