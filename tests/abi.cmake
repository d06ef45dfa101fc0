# Binary compatibility with NVIDIA's NCCL (label api): tests/abi_compat.c is compiled against
# the CUDA toolkit's own nccl.h and linked with -lnccl against lib/nccl-compat
# (tools/nccl-compat.cmake), never against libtutti directly, then run as 4 ranks under
# tutti-run. abi_needed checks that the binary records NEEDED libnccl.so.2 as a program built
# for NCCL does. Without NVIDIA's header the tests are not registered.
set(TUTTI_NVIDIA_NCCL_INCLUDE /usr/local/cuda/include)
if(NOT EXISTS ${TUTTI_NVIDIA_NCCL_INCLUDE}/nccl.h)
  message(STATUS "abi_compat: ${TUTTI_NVIDIA_NCCL_INCLUDE}/nccl.h not found; ABI tests skipped")
elseif(TARGET nccl_compat AND TARGET tutti-run)
  add_executable(abi_compat ${CMAKE_SOURCE_DIR}/tests/abi_compat.c)
  # SYSTEM: NVIDIA's headers are not held to our warning flags.
  target_include_directories(abi_compat SYSTEM PRIVATE ${TUTTI_NVIDIA_NCCL_INCLUDE})
  target_compile_options(abi_compat PRIVATE ${TUTTI_WARNINGS})
  target_link_libraries(abi_compat PRIVATE "-L${TUTTI_NCCL_COMPAT_DIR}" "-lnccl")
  set_target_properties(abi_compat PROPERTIES BUILD_RPATH ${TUTTI_NCCL_COMPAT_DIR})
  add_dependencies(abi_compat nccl_compat)

  add_test(NAME abi_compat
           COMMAND $<TARGET_FILE:tutti-run> -n 4 --timeout 80 $<TARGET_FILE:abi_compat>)
  set_tests_properties(abi_compat PROPERTIES LABELS api TIMEOUT 90 PROCESSORS 2
                       ENVIRONMENT
                       "TUTTI_TIMEOUT_MS=30000;LD_LIBRARY_PATH=${TUTTI_NCCL_COMPAT_DIR}")
  # The dynamic section must name libnccl.so.2 and not libtutti; the compat library's SONAME
  # must be libnccl.so.2.
  add_test(NAME abi_needed
           COMMAND sh -c "readelf -d \"$0\" | grep -q 'NEEDED.*\\[libnccl\\.so\\.2\\]' &&
                          ! readelf -d \"$0\" | grep -q 'libtutti' &&
                          readelf -d \"$1\" | grep -q 'SONAME.*\\[libnccl\\.so\\.2\\]' &&
                          echo 'abi_needed: ok'"
                   $<TARGET_FILE:abi_compat> $<TARGET_FILE:nccl_compat>)
  set_tests_properties(abi_needed PROPERTIES LABELS api TIMEOUT 30
                       PASS_REGULAR_EXPRESSION "abi_needed: ok")
endif()
