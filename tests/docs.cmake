# docs/env.md is generated from the parameter table; this test fails when they disagree.
add_test(NAME docs_env_current
         COMMAND sh -c "$<TARGET_FILE:tutti-info> --markdown | diff -u ${CMAKE_SOURCE_DIR}/docs/env.md -")
set_tests_properties(docs_env_current PROPERTIES LABELS unit TIMEOUT 30)

# The README's first program, compiled and run with the README's own commands, and its
# NCCL_DEBUG levels against tutti-info's (tests/test_readme.sh). A sanitizer build's libtutti
# cannot be linked by the plain `cc` command the README gives, so there it is skipped.
if(TUTTI_SANITIZE)
  add_test(NAME docs_readme
           COMMAND sh -c "echo 'skipped: the README builds with plain cc, not against ASan'; exit 77")
else()
  add_test(NAME docs_readme
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/test_readme.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
                   ${CMAKE_BINARY_DIR}/readme-test $<TARGET_FILE:tutti-info>)
endif()
# Its DDP block builds tutti.torch's shim on first use (a minute or two): into the build tree,
# which the python tests share (tests/python.cmake), and within a limit that allows for it.
set_tests_properties(docs_readme PROPERTIES LABELS docs TIMEOUT 600 SKIP_RETURN_CODE 77
                     PROCESSORS 2
                     ENVIRONMENT "TUTTI_TORCH_BUILD_DIR=${CMAKE_BINARY_DIR}/tutti-torch")
