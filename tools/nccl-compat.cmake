# The NCCL compatibility library: lib/nccl-compat/libnccl.so.2 in the build directory, so that a
# program built for NVIDIA's NCCL (linked with -lnccl, recording NEEDED libnccl.so.2) runs on
# Tutti unchanged, by pointing LD_LIBRARY_PATH at lib/nccl-compat.
#
# It is a second shared library made from the same objects as libtutti, with NCCL's name and
# SONAME (libnccl.so.2, version 2.28.9), rather than a symlink to libtutti.so: a symlink would
# carry libtutti's SONAME (libtutti.so.0), which ldconfig, ldd and packaging would report instead
# of libnccl.so.2, and a program linked against the symlink would record the wrong NEEDED entry.
# The cost is one more link step. A process must load only one of the two libraries.
set(TUTTI_NCCL_COMPAT_DIR ${CMAKE_BINARY_DIR}/lib/nccl-compat)
add_library(nccl_compat SHARED $<TARGET_OBJECTS:tutti_obj>)
target_link_libraries(nccl_compat PRIVATE Threads::Threads rt m ${TUTTI_LIB_DEPS})
set_target_properties(nccl_compat PROPERTIES
  OUTPUT_NAME nccl
  VERSION 2.28.9
  SOVERSION 2
  LIBRARY_OUTPUT_DIRECTORY ${TUTTI_NCCL_COMPAT_DIR})
