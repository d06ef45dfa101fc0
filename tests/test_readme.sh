#!/bin/sh
# The README as a newcomer follows it (label docs). Every fenced code block of README.md is
# accounted for, in a directory laid out like the top of the source tree after `make` (include/,
# python/, bench/, tools/ and Makefile are links to the real ones, build/release/ to the build
# tree, so nothing is written into the tree):
#   - the C block (the first program) is saved as example.c; it must also be examples/first.c,
#     which the examples test runs;
#   - the sh block after it (build and run that program) is run exactly as written: every rank
#     must print its sum;
#   - the trace block is run exactly as written: 4 trace files and a picture with bars;
#   - the Python block is run exactly as written (skipped, said so, without numpy);
#   - the benchmark block's tutti-perf line is run exactly as written; bench/compare (which
#     installs MPI libraries) must exist and be executable;
#   - the blocks that build or test the whole tree (make demo/test, cmake --preset ..., make
#     asan ...) are not run inside the test suite they would start: each make target they name
#     must exist (make -n) and each preset must be listed by cmake --list-presets.
# A block the test does not know fails it, so that a new README block gets a check.
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
for f in include python bench tools examples Makefile CMakePresets.json; do ln -s "$src/$f" "$work/$f"; done
ln -s "$build" "$work/build/release"

# Every fenced block as block-N (N from 1), with its language in block-N.lang.
awk -v dir="$work" '
    /^```[a-z]*$/ && !inside { n++; inside = 1; lang = substr($0, 4);
                               print lang > (dir "/block-" n ".lang"); close(dir "/block-" n ".lang");
                               printf "" > (dir "/block-" n); next }
    /^```$/ && inside { inside = 0; close(dir "/block-" n); next }
    inside { print >> (dir "/block-" n) }' "$readme"
nblocks=$(ls "$work"/block-*.lang 2>/dev/null | wc -l)
[ "$nblocks" -gt 0 ] || fail "README.md has no code blocks"

run_block() { # run_block N: sh -e on block N, in the work directory
    echo "test_readme: running block $1, in $work:"
    cat "$work/block-$1"
    (cd "$work" && sh -e "block-$1" 2>&1) || fail "README block $1 failed: $(cat "$work/block-$1")"
}

seen_c=0 ran_program=0
i=1
while [ $i -le "$nblocks" ]; do
    lang=$(cat "$work/block-$i.lang")
    first=$(head -n 1 "$work/block-$i")
    case "$lang:$first" in
    c:*)
        cp "$work/block-$i" "$work/example.c"
        cmp -s "$work/example.c" "$src/examples/first.c" ||
            fail "README.md's first program differs from examples/first.c: $(diff \
                  "$work/example.c" "$src/examples/first.c")"
        seen_c=1
        ;;
    sh:cc\ *)
        [ $seen_c = 1 ] || fail "block $i builds example.c before the README shows it"
        out=$(run_block $i)
        echo "$out"
        for r in 0 1 2 3; do
            echo "$out" | grep -q "rank $r of 4: sum of ranks = 6$" ||
                fail "rank $r did not print 'rank $r of 4: sum of ranks = 6'"
        done
        ran_program=1
        ;;
    sh:TUTTI_TRACE_FILE=*)
        [ $ran_program = 1 ] || fail "block $i traces ./example before the README builds it"
        rm -f "$work"/trace-*.json "$work/trace.svg"
        run_block $i
        [ "$(ls "$work"/trace-*.json | wc -l)" = 4 ] || fail "block $i: not 4 trace files"
        grep -q '<rect' "$work/trace.svg" || fail "block $i: trace.svg has no bars"
        echo "test_readme: block $i wrote 4 trace files and a picture"
        ;;
    sh:PYTHONPATH=python*ddp_train.py*)
        # The DDP example: every rank trains; rank 0 reports its steps and their time.
        if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
            out=$(run_block $i)
            echo "$out" | tail -n 3
            echo "$out" | grep -q "^\[0\] step 99 loss " ||
                fail "block $i: the DDP example did not reach step 99: $out"
            echo "$out" | grep -q "^\[0\] tutti, 2 ranks: 100 steps in " ||
                fail "block $i: the DDP example did not report its 100 steps: $out"
        else
            echo "test_readme: block $i (PyTorch) not run: /usr/bin/python3 has no torch"
        fi
        ;;
    sh:PYTHONPATH=python*)
        if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
            out=$(run_block $i)
            echo "$out"
            for r in 0 1 2 3; do
                echo "$out" | grep -q "^\[$r\] $r \[6\. 6\. 6\. 6\.\]$" ||
                    fail "the Python block's rank $r did not print its sums"
            done
        else
            echo "test_readme: block $i (Python) not run: /usr/bin/python3 has no numpy"
        fi
        ;;
    sh:build/release/tutti-run*tutti-perf*)
        head -n 1 "$work/block-$i" >"$work/perf.sh"
        out=$(cd "$work" && sh -e perf.sh 2>&1) || fail "the benchmark line failed: $out"
        echo "$out" | grep -q "Out of bounds values : 0 OK" ||
            fail "the benchmark line did not check OK: $out"
        grep -q '^bench/compare' "$work/block-$i" && { [ -x "$src/bench/compare" ] ||
            fail "README names bench/compare, which is not an executable"; }
        echo "test_readme: block $i: the tutti-perf line ran and checked OK; bench/compare exists"
        ;;
    sh:make\ *|sh:cmake\ --preset*)
        # Not run: they build and test the whole tree. Their targets and presets must exist.
        targets=$(sed -n 's/^make \([a-z][a-z]*\).*/\1/p' "$work/block-$i")
        for t in $targets; do
            make -n -C "$src" "$t" >/dev/null 2>&1 || fail "block $i: no make target '$t'"
        done
        presets=$(grep -o -- '--preset [a-z]*' "$work/block-$i" | awk '{print $2}' | sort -u)
        presets="$presets $(sed -n 's/.*# or \([a-z, ]*\)$/\1/p' "$work/block-$i" | tr -d ,)"
        listed=$(cd "$src" && cmake --list-presets 2>/dev/null)
        for p in $presets; do
            echo "$listed" | grep -q "\"$p\"" || fail "block $i: no CMake preset '$p'"
        done
        echo "test_readme: block $i not run (it builds or tests the whole tree); make targets" \
             $targets "and presets" $presets "exist"
        ;;
    *)
        fail "README block $i ($lang, starting '$first') has no check in tests/test_readme.sh"
        ;;
    esac
    i=$((i + 1))
done
[ $ran_program = 1 ] || fail "README.md has no block that builds and runs its first program"

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
echo "test_readme: ok, $nblocks blocks (NCCL_DEBUG levels:" $levels")"
