# The installed Tutti (label install): cmake --install into a temporary prefix consumed with
# pkg-config and with find_package(Tutti), and the Debian packages unpacked into a throwaway
# root; every case builds the README's first program out of tree and runs it as 2 ranks with
# the installed tutti-run (tests/test_install.sh). They also check that every tool answers
# --help with exit 0 (tools_help, label unit).
# A sanitizer build's libraries cannot be linked by the plain compiler commands a user runs, so
# there the cases are skipped.
foreach(case pkgconfig cmake deb)
  if(TUTTI_SANITIZE)
    add_test(NAME install_${case}
             COMMAND sh -c "echo 'skipped: a sanitizer build is not for installing'; exit 77")
  else()
    add_test(NAME install_${case}
             COMMAND sh ${CMAKE_SOURCE_DIR}/tests/test_install.sh ${case} ${CMAKE_BINARY_DIR}
                     ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/install-test/${case})
  endif()
  set_tests_properties(install_${case} PROPERTIES LABELS install TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endforeach()

foreach(tool tutti-run tutti-perf tutti-info tutti-tune)
  add_test(NAME tools_help_${tool}
           COMMAND sh -c "\"$0\" --help | grep -q '^usage: ' && \"$0\" --help >/dev/null"
                   $<TARGET_FILE:${tool}>)
  set_tests_properties(tools_help_${tool} PROPERTIES LABELS unit TIMEOUT 30)
endforeach()
add_test(NAME tools_help_tutti-trace
         COMMAND sh -c "command -v python3 >/dev/null || { echo 'skipped: no python3'; exit 77; }
                        \"$0\" --help | grep -q '^usage: ' && \"$0\" --help >/dev/null"
                 ${CMAKE_SOURCE_DIR}/tools/tutti-trace)
set_tests_properties(tools_help_tutti-trace PROPERTIES LABELS unit TIMEOUT 30 SKIP_RETURN_CODE 77)
