#!/bin/sh
# Checks the include direction of DESIGN.md section 2 on every source under src/:
#   api -> core -> {algo, bootstrap} -> transport -> {reduce, device, util}
# A folder may include its own headers and those of folders below it; folders on one level
# (algo and bootstrap; reduce and device) do not include each other, and util, at the bottom,
# includes only util. Only quoted includes of the form "folder/..." are layer references;
# <system> headers and the public "nccl.h"/"tutti.h" are free for all.
# Inside src/core/ the same rule holds among its files, in the order written below (DESIGN.md
# section 2, docs/design.md "Inside the core"): a file may include the core headers of its own
# level and of levels below it, never above; core/core.h gathers the core's headers for api/ and
# is never included inside core/. Every file of core/ must have a level here.
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

# The core's files, top to bottom. Keep in step with docs/design.md, "Inside the core".
core_level() {
    case $1 in
        core.h) echo 0 ;; # the umbrella for api/
        comm.c | comm_split.c | lifecycle.h | setup.c | setup.h | env_init.c | env_init.h | \
            env_detect.c | watch.c | watch.h | dump.c) echo 1 ;;
        coll.c | coll.h | group.c | group.h | event.c | event.h) echo 2 ;;
        dispatch.c | dispatch.h) echo 3 ;;
        stream.c | stream_scan.c | stream.h) echo 4 ;;
        task.c | task.h | connect.c | connect.h | redop.c | redop.h | mem.c | mem_reg.c | \
            mem.h | comm.h) echo 5 ;;
        engine.c | engine.h | forms.c | forms.h) echo 6 ;;
        state.c | state.h) echo 7 ;;
        *) return 1 ;;
    esac
}
core_names="1 lifecycle, 2 submission, 3 dispatch, 4 streams, 5 tasks, 6 engine, 7 state"

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
trap 'rm -f "$tmp" "$tmp.core"' EXIT

# Every file of core/ has a level.
for file in "$src"/core/*; do
    [ -f "$file" ] || continue
    name=$(basename "$file")
    core_level "$name" >/dev/null ||
        report "src/core/$name has no level in the core's order (add it to tools/check_layers.sh)"
done

# The core's order among its files: '#include "core/name"' in core/ files.
for file in "$src"/core/*; do
    [ -f "$file" ] || continue
    from=$(basename "$file")
    from_level=$(core_level "$from") || continue
    grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"core/' "$file" |
        sed -E 's|^([0-9]+):.*"core/([^"]+)".*|\1 \2|' >"$tmp.core" || true
    while read -r line target; do
        target_level=$(core_level "$target") || {
            report "src/core/$from:$line: includes core/$target, which has no level"
            continue
        }
        if [ "$target_level" -lt "$from_level" ]; then
            report "src/core/$from:$line: core/$from (level $from_level) includes core/$target (level $target_level), above it ($core_names)"
        fi
    done <"$tmp.core"
done
rm -f "$tmp.core"

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
