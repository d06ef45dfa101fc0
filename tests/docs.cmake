# docs/env.md is generated from the parameter table; this test fails when they disagree.
add_test(NAME docs_env_current
         COMMAND sh -c "$<TARGET_FILE:tutti-info> --markdown | diff -u ${CMAKE_SOURCE_DIR}/docs/env.md -")
set_tests_properties(docs_env_current PROPERTIES LABELS unit TIMEOUT 30)
