#!/bin/sh
# Checks that a built libtutti exports only the public API: every defined dynamic symbol of the
# shared library, and every defined global symbol of the static one, must be nccl*, pnccl* or
# tutti*, apart from the few that the linker and the C runtime define in every shared object
# (listed below by name). Prints each offender and exits 1 when there are any.
# Usage: tools/check_symbols.sh path/to/libtutti.so | path/to/libtutti.a
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 <libtutti.so | libtutti.a>" >&2
    exit 2
fi
lib=$1
if [ ! -f "$lib" ]; then
    echo "check_symbols: $lib does not exist" >&2
    exit 2
fi

# The linker's and crt's own symbols, which may appear defined in any shared object.
allowed_runtime='_init _fini _edata _end __bss_start'

# A static archive (it starts with "!<arch>") has no dynamic table: what a program linking it sees
# are its members' global symbols. nm prints "value type name" (or "type name" for some absolute
# symbols), and for an archive also a "member.o:" line per member, which has one field.
if [ "$(head -c 7 "$lib")" = '!<arch>' ]; then
    nm_flags='-g'
    hint='libtutti.a must be one object whose hidden symbols are local: see CMakeLists.txt'
else
    nm_flags='-D'
    hint='mark internal functions static or leave them hidden'
fi
symbols=$(nm $nm_flags --defined-only "$lib" | awk 'NF >= 2 { print $NF }' | sed 's/@.*//' |
          sort -u)
if [ -z "$symbols" ]; then
    echo "check_symbols: $lib exports no symbols at all" >&2
    exit 1
fi

bad=0
for sym in $symbols; do
    case $sym in
        nccl*|pnccl*|tutti*) continue ;;
    esac
    case " $allowed_runtime " in
        *" $sym "*) continue ;;
    esac
    echo "check_symbols: $lib exports '$sym', which is not nccl*, pnccl* or tutti*" \
         "($hint)" >&2
    bad=1
done
if [ $bad -ne 0 ]; then
    exit 1
fi
count=$(printf '%s\n' "$symbols" | wc -l)
echo "check_symbols: $lib exports $count symbols, all public"
