#!/bin/sh
# The README as a newcomer follows it (label docs). Its C code block (the first program) is
# saved as example.c and its next sh block (the build and run commands) is run exactly as
# written, in a directory laid out like the top of the source tree after `make` (include/ and
# build/release/ are links to the real ones, so nothing is written into the tree); every rank
# must print its sum. The C block must also be examples/first.c, which the examples test runs.
# Last, the NCCL_DEBUG row of the README's table must name the levels tutti-info lists.
# Usage: test_readme.sh SOURCE_DIR BUILD_DIR WORK_DIR TUTTI_INFO
set -eu
src=$1 build=$2 work=$3 info=$4
readme=$src/README.md

fail() {
    echo "test_readme: $*" >&2
    exit 1
}

rm -rf "$work"
mkdir -p "$work/build"
ln -s "$src/include" "$work/include"
ln -s "$build" "$work/build/release"

# The first ```c block, and the first ```sh block after it.
awk '/^```c$/ { inside = 1; next } inside && /^```$/ { exit } inside' "$readme" >"$work/example.c"
awk '/^```c$/ { seen = 1 } seen && /^```sh$/ { inside = 1; next } inside && /^```$/ { exit }
     inside' "$readme" >"$work/commands.sh"
[ -s "$work/example.c" ] || fail "README.md has no \`\`\`c block"
[ -s "$work/commands.sh" ] || fail "README.md has no \`\`\`sh block after its \`\`\`c block"
cmp -s "$work/example.c" "$src/examples/first.c" ||
    fail "README.md's first program differs from examples/first.c: $(diff "$work/example.c" \
          "$src/examples/first.c")"

echo "test_readme: running, in $work:"
cat "$work/commands.sh"
out=$(cd "$work" && sh -e commands.sh 2>&1) || fail "the README's commands failed: $out"
echo "$out"
for r in 0 1 2 3; do
    echo "$out" | grep -q "rank $r of 4: sum of ranks = 6$" ||
        fail "rank $r did not print 'rank $r of 4: sum of ranks = 6'"
done

# tutti-info describes NCCL_DEBUG as "Log level: NONE, VERSION, ..., or TRACE".
levels=$("$info" | grep -A1 '^  NCCL_DEBUG ' | sed -n 's/.*Log level: //p' | tr -d ',' |
         sed 's/ or / /')
row=$(grep '^| `NCCL_DEBUG` |' "$readme") || fail "README.md has no NCCL_DEBUG row"
[ -n "$levels" ] || fail "tutti-info does not list NCCL_DEBUG's levels"
for level in $levels; do
    echo "$row" | grep -q "\`$level\`" || fail "README's NCCL_DEBUG row lacks $level: $row"
done
readme_levels=$(echo "$row" | sed 's/^| `NCCL_DEBUG` |//' | grep -o '`[A-Z]*`' | tr -d '`')
for level in $readme_levels; do
    case " $levels " in
        *" $level "*) ;;
        *) fail "README's NCCL_DEBUG row names $level, which tutti-info does not list" ;;
    esac
done
echo "test_readme: ok (NCCL_DEBUG levels:" $levels")"
