#!/bin/sh
# Runs a command, prints its output, and passes only when it exits 0 and at least COUNT lines of
# that output match REGEX (grep -E): a test of a multi-rank program that wants every rank's
# line, and its exit status too, which CTest's PASS_REGULAR_EXPRESSION would ignore.
# Usage: expect_lines.sh COUNT REGEX command [args...]
set -u
want=$1 regex=$2
shift 2
out=$("$@" 2>&1)
status=$?
printf '%s\n' "$out"
got=$(printf '%s\n' "$out" | grep -cE "$regex")
if [ $status -ne 0 ]; then
    echo "expect_lines: '$*' exited $status" >&2
    exit 1
fi
if [ "$got" -lt "$want" ]; then
    echo "expect_lines: $got lines match '$regex', want $want" >&2
    exit 1
fi
