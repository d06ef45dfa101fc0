#!/bin/sh
# if_built.sh BUILD_DIR COMMAND [ARGS...]: runs COMMAND when this build has the UCX transport,
# else exits 77 (CTest's "skipped") saying why.
build=$1
shift
if ! "$build/tutti-info" | grep -q '^build:.*transports.* ucx'; then
    echo "skipped: this build has no UCX transport (install libucx-dev and rebuild)"
    exit 77
fi
exec "$@"
