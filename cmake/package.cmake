# Debian packages, built by `cpack -G DEB` in the build directory (docs/install.md):
#   libtutti0     libtutti.so.0 and the compat libnccl.so.2 (in its private directory)
#   libtutti-dev  headers, libtutti.so, libtutti.a, tutti.pc, the CMake package
#   tutti         tutti-run, tutti-perf, tutti-info, tutti-tune, their man pages, the docs
# Library dependencies come from dpkg-shlibdeps; the packages depend on each other at exactly
# this version, since 0.x promises no compatibility between releases.
set(CPACK_PACKAGE_NAME tutti)
set(CPACK_PACKAGE_VENDOR "Tutti developers")
set(CPACK_PACKAGE_CONTACT "Tutti developers <tutti@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "collective communications with NCCL's API for CPU processes")
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES OFF)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib dev tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# tutti-perf needs libtutti.so.0, which is in no installed package when the tools package is
# built: dpkg-shlibdeps finds it in the build tree, and the dependency on libtutti0 is stated
# below instead.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR})
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(CPACK_DEBIAN_LIB_PACKAGE_NAME libtutti0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON) # a shlibs file for libtutti0, ldconfig in its scripts
set(CPACK_COMPONENT_LIB_DESCRIPTION
    "Tutti: collective communications with NCCL's API for CPU processes (library)
 AllReduce, Broadcast, AllGather and NCCL's other collectives between processes, over shared
 memory on one host and TCP across hosts. Includes libnccl.so.2 in /usr/lib/tutti/nccl-compat,
 which runs programs built for NVIDIA's NCCL when put on LD_LIBRARY_PATH.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libtutti-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DEPENDS lib)
# libtutti.a and tutti.pc's Requires.private need libsodium's static library and .pc file, and
# TuttiConfig.cmake finds it with pkg-config.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libsodium-dev, pkgconf | pkg-config")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "Tutti: collective communications with NCCL's API for CPU processes (development files)
 nccl.h and tutti.h, libtutti.so and libtutti.a, a pkg-config file (tutti) and a CMake package
 (find_package(Tutti), targets Tutti::tutti, Tutti::tutti_static, Tutti::nccl_compat).")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME tutti)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
set(CPACK_COMPONENT_TOOLS_DEPENDS lib)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "python3") # tutti-trace; shlibdeps adds the rest
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
    "Tutti: collective communications with NCCL's API for CPU processes (tools)
 tutti-run launches a job of N processes on one or several hosts; tutti-perf is an
 nccl-tests-style benchmark of every collective; tutti-info prints the version and every
 parameter; tutti-tune prints the cost model's algorithm choices; tutti-trace merges and
 draws the timeline traces of TUTTI_TRACE_FILE.")

include(CPack)
