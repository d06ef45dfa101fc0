#!/bin/sh
# Builds the libFuzzer harnesses with clang (ASan + UBSan) and runs each for FUZZ_SECONDS
# (default 300) from its committed seed corpus, copying what it learns to a scratch corpus so
# the tree stays clean. Exit 77 (skipped) without clang's libFuzzer; 1 on a finding.
# Usage: tests/fuzz/run.sh SOURCE_DIR BUILD_DIR [TARGET...]   (label fuzz in CTest)
set -eu
src=$1
out=$2/fuzz
shift 2
targets=${*:-fuzz_parsers fuzz_bootstrap fuzz_tcp fuzz_env}
seconds=${FUZZ_SECONDS:-300}
if ! command -v clang >/dev/null 2>&1 ||
   ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){return 0;}' |
     clang -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null; then
    echo "skipped: clang with libFuzzer is not installed (apt-get install clang)"
    exit 77
fi
mkdir -p "$out"
# The library's sources as CMakeLists.txt takes them for a build without CUDA and UCX: src/*/*.c
# (src/device/cuda/ needs the toolkit's headers) less the UCX transport (ucx*.c needs
# TUTTI_HAVE_UCX; no harness reaches it).
all=$(find "$src/src" -mindepth 2 -maxdepth 2 -name '*.c' ! -name 'ucx*.c' | sort)
flags="-g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
       -D_GNU_SOURCE -DTUTTI_VERSION_STRING=\"fuzz\" -I$src/include -I$src/src"
# The library's sources are compiled once (into $out/obj, again when the source or any header
# is newer than its object: param.h's table, for one, defines what param.c compiles into) and
# shared by every harness.
mkdir -p "$out/obj"
# shellcheck disable=SC2046
newest_h=$(ls -t $(find "$src/src" "$src/include" -name '*.h') | head -1)
for f in $all; do
    o="$out/obj/$(echo "${f#"$src"/}" | tr / _).o"
    if [ ! -e "$o" ] || [ "$f" -nt "$o" ] || [ "$newest_h" -nt "$o" ]; then
        # shellcheck disable=SC2086
        clang $flags -c "$f" -o "$o"
    fi
done
for t in $targets; do
    # A harness that includes library sources (for their static functions) names them on a
    # "fuzz-includes:" line; they are left out of what it links.
    skip=$(sed -n 's/.*fuzz-includes: *//p' "$src/tests/fuzz/$t.c")
    objs=
    for f in $all; do
        case " $skip " in
            *" ${f#"$src"/} "*) ;;
            *) objs="$objs $out/obj/$(echo "${f#"$src"/}" | tr / _).o" ;;
        esac
    done
    # shellcheck disable=SC2086
    clang $flags -fsanitize=fuzzer "$src/tests/fuzz/$t.c" $objs -lsodium -lpthread -lrt -lm \
        -o "$out/$t"
    rm -rf "$out/$t.corpus"
    mkdir -p "$out/$t.corpus"
    cp "$src"/tests/fuzz/corpus/"${t#fuzz_}"/* "$out/$t.corpus/" 2>/dev/null || true
    echo "fuzz: $t for $seconds s"
    NCCL_DEBUG=NONE "$out/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 "$out/$t.corpus"
done
