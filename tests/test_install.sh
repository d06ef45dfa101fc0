#!/bin/sh
# The installed Tutti, as a user meets it (label install). Each case starts from the build tree
# and works in a directory of its own:
#   pkgconfig  cmake --install into a temporary prefix; build the README's first program out of
#              tree with `pkg-config --cflags --libs tutti` (and statically, with --static) and
#              run it as 2 ranks with the installed tutti-run; the installed tools answer --help,
#              tutti-perf runs, the man pages are found.
#   cmake      the same install; an out-of-tree CMake project (tests/install_consumer) finds it
#              with find_package(Tutti) and links Tutti::tutti, Tutti::tutti_static and
#              Tutti::nccl_compat; each program runs as 2 ranks.
#   deb        cpack builds the Debian packages; their names and dependencies are checked, apt
#              resolves them (simulated), and they are unpacked into a throwaway root (dpkg -x),
#              from which the first program is built and run as 2 ranks.
# Usage: test_install.sh CASE BUILD_DIR SOURCE_DIR WORK_DIR
set -eu
case_name=$1 build=$2 src=$3 work=$4
first=$src/examples/first.c
rm -rf "$work"
mkdir -p "$work"
cd "$work"

fail() {
    echo "test_install $case_name: $*" >&2
    exit 1
}

# Runs a program as 2 ranks with the given tutti-run; each rank must print the right sum.
run_two() {
    launcher=$1
    shift
    out=$("$launcher" -n 2 --timeout 60 "$@" 2>&1) || fail "$launcher -n 2 $* failed: $out"
    echo "$out"
    for r in 0 1; do
        echo "$out" | grep -q "rank $r of 2: sum of ranks = 1" ||
            fail "rank $r of $* did not print 'rank $r of 2: sum of ranks = 1'"
    done
}

install_prefix() {
    cmake --install "$build" --prefix "$work/prefix" >install.log ||
        fail "cmake --install failed: $(cat install.log)"
    for f in include/nccl.h include/tutti.h lib/libtutti.so lib/libtutti.so.0 lib/libtutti.a \
             lib/tutti/nccl-compat/libnccl.so.2 lib/pkgconfig/tutti.pc \
             lib/cmake/Tutti/TuttiConfig.cmake lib/cmake/Tutti/TuttiConfigVersion.cmake \
             bin/tutti-run bin/tutti-perf bin/tutti-info bin/tutti-tune bin/tutti-trace \
             share/man/man1/tutti-run.1 share/man/man1/tutti-trace.1 share/doc/tutti/README.md; do
        [ -e "prefix/$f" ] || fail "cmake --install did not install $f"
    done
}

case $case_name in
pkgconfig)
    install_prefix
    export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
    echo "pkg-config --cflags --libs tutti: $(pkg-config --cflags --libs tutti)"
    echo "pkg-config --static --libs tutti: $(pkg-config --static --libs tutti)"
    [ "$(pkg-config --variable=prefix tutti)" = "$work/prefix" ] ||
        fail "tutti.pc has prefix $(pkg-config --variable=prefix tutti), not $work/prefix"
    libdir=$(pkg-config --variable=libdir tutti)
    # shellcheck disable=SC2046 # pkg-config's output is meant to be split into words
    cc "$first" $(pkg-config --cflags --libs tutti) -Wl,-rpath,"$libdir" -o first
    run_two prefix/bin/tutti-run ./first
    # Static: the archive itself, then what Libs.private adds.
    # shellcheck disable=SC2046
    cc "$first" $(pkg-config --cflags tutti) "$libdir/libtutti.a" \
        $(pkg-config --static --libs-only-l tutti | sed 's/-ltutti//') -o first_static
    ! readelf -d first_static | grep -q libtutti || fail "first_static needs libtutti.so"
    run_two prefix/bin/tutti-run ./first_static
    for tool in tutti-run tutti-perf tutti-info tutti-tune tutti-trace; do
        prefix/bin/$tool --help >help.txt || fail "$tool --help exited $?"
        grep -q usage help.txt || fail "$tool --help printed no usage"
    done
    prefix/bin/tutti-run -n 2 prefix/bin/tutti-perf -b 8 -e 1K -f 4 -n 2 -w 1 >perf.txt ||
        fail "installed tutti-perf failed: $(cat perf.txt)"
    if command -v man >/dev/null 2>&1; then
        for tool in tutti-run tutti-perf tutti-info tutti-tune tutti-trace; do
            MANPATH="$work/prefix/share/man" man -w $tool >/dev/null ||
                fail "man cannot find $tool in $work/prefix/share/man"
        done
    fi
    ;;
cmake)
    install_prefix
    cmake -S "$src/tests/install_consumer" -B consumer -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$work/prefix" -DFIRST_SOURCE="$first" >configure.log ||
        fail "find_package(Tutti) project did not configure: $(cat configure.log)"
    cmake --build consumer >build.log || fail "consumer did not build: $(cat build.log)"
    # CMake gives the programs an RPATH to the installed libraries, as it does for any imported
    # shared library; the compat one must need libnccl.so.2, the static one no library of ours.
    readelf -d consumer/first_compat | grep -q 'NEEDED.*libnccl\.so\.2' ||
        fail "first_compat does not need libnccl.so.2"
    ! readelf -d consumer/first_static | grep -q 'libtutti\|libnccl' ||
        fail "first_static needs a shared library of Tutti"
    for p in first_shared first_static first_compat; do
        run_two prefix/bin/tutti-run consumer/$p
    done
    ;;
deb)
    command -v dpkg-deb >/dev/null 2>&1 || { echo "skipped: dpkg-deb is not installed"; exit 77; }
    cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/packages" >cpack.log ||
        fail "cpack failed: $(cat cpack.log)"
    ls packages/*.deb
    version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")
    for pkg in libtutti0 libtutti-dev tutti; do
        deb=$(ls packages/${pkg}_"$version"_*.deb) || fail "no package $pkg"
        echo "$pkg: Depends: $(dpkg-deb -f "$deb" Depends)"
    done
    dpkg-deb -f packages/libtutti0_*.deb Depends | grep -q libc6 || fail "libtutti0 lacks libc6"
    dpkg-deb -f packages/libtutti-dev_*.deb Depends | grep -q "libtutti0 (= $version)" ||
        fail "libtutti-dev does not depend on libtutti0 (= $version)"
    dpkg-deb -f packages/libtutti-dev_*.deb Depends | grep -q "pkg-config" ||
        fail "libtutti-dev does not depend on pkg-config (TuttiConfig.cmake uses it)"
    dpkg-deb -f packages/tutti_*.deb Depends | grep -q "libtutti0 (= $version)" ||
        fail "tutti does not depend on libtutti0 (= $version)"
    # What `apt-get install ./*.deb` would do, simulated: every dependency must resolve.
    if command -v apt-get >/dev/null 2>&1; then
        apt-get install -s -o Debug::NoLocking=1 ./packages/*.deb >apt.log 2>&1 ||
            fail "apt-get cannot install the packages: $(cat apt.log)"
        grep -q '^Conf libtutti0 ' apt.log || fail "apt-get would not install libtutti0: $(cat apt.log)"
    fi
    for deb in packages/*.deb; do
        dpkg -x "$deb" root
    done
    export PKG_CONFIG_SYSROOT_DIR="$work/root" PKG_CONFIG_LIBDIR="$work/root/usr/lib/pkgconfig"
    # shellcheck disable=SC2046
    cc "$first" $(pkg-config --cflags --libs tutti) -o first
    LD_LIBRARY_PATH="$work/root/usr/lib" run_two root/usr/bin/tutti-run ./first
    ;;
*)
    fail "unknown case (pkgconfig, cmake, deb)"
    ;;
esac
echo "test_install $case_name: ok"
