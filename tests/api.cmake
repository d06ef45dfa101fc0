# Public API tests (label api) and the build-hygiene checks of the exported symbols and of the
# layer include rule (label unit), each with a test proving that the check can fail.

add_executable(api_args tests/api_args.c)
target_link_libraries(api_args PRIVATE tutti)
target_compile_options(api_args PRIVATE ${TUTTI_WARNINGS})
add_test(NAME api_args COMMAND api_args)
add_test(NAME api_one_rank COMMAND api_args one_rank)
set_tests_properties(api_args api_one_rank PROPERTIES LABELS api TIMEOUT 60 SKIP_RETURN_CODE 77)

add_test(NAME check_symbols
         COMMAND sh ${CMAKE_SOURCE_DIR}/tools/check_symbols.sh $<TARGET_FILE:tutti>)
add_test(NAME check_symbols_static
         COMMAND sh ${CMAKE_SOURCE_DIR}/tools/check_symbols.sh $<TARGET_FILE:tutti_static>)
add_test(NAME check_layers COMMAND sh ${CMAKE_SOURCE_DIR}/tools/check_layers.sh
                                   ${CMAKE_SOURCE_DIR}/src)
# The library's thread-local block: it holds initial-exec variables, so glibc places the whole
# block in the static TLS that a dlopen'ed library shares with the others (Python loading it):
# 512 more bytes of it made every Python test fail with "cannot allocate memory in static TLS
# block". Large per-thread buffers go on the heap; the limit leaves a little room.
add_test(NAME check_tls_size
         COMMAND sh -c "size=$(readelf -lW \"$0\" | awk '$1 == \"TLS\" {print $6}') &&
                        [ -n \"$size\" ] && [ $((size)) -le 1408 ] &&
                        echo \"check_tls_size: $((size)) bytes\" ||
                        { echo \"check_tls_size: the TLS block is $size bytes (at most 1408)\"; exit 1; }"
                 $<TARGET_FILE:tutti>)

# Fixtures the checks must reject: a library exporting tt_leaked_symbol, the plain archive of the
# library's objects (tutti_internal, whose tt_* symbols are global), and a src/ tree whose util/
# includes core/.
add_library(api_badsyms SHARED tests/api_badsyms.c)
set_target_properties(api_badsyms PROPERTIES C_VISIBILITY_PRESET default)
add_test(NAME check_symbols_detects
         COMMAND sh ${CMAKE_SOURCE_DIR}/tools/check_symbols.sh $<TARGET_FILE:api_badsyms>)
set_tests_properties(check_symbols_detects PROPERTIES
                     PASS_REGULAR_EXPRESSION "exports 'tt_leaked_symbol'")
add_test(NAME check_symbols_static_detects
         COMMAND sh ${CMAKE_SOURCE_DIR}/tools/check_symbols.sh $<TARGET_FILE:tutti_internal>)
set_tests_properties(check_symbols_static_detects PROPERTIES
                     PASS_REGULAR_EXPRESSION "exports 'tt_[a-z_]+', which is not")
set(TT_LAYERS_FIXTURE ${CMAKE_CURRENT_BINARY_DIR}/check_layers_fixture/src)
add_test(NAME check_layers_detects
         COMMAND sh -c "rm -rf \"$1\" && mkdir -p \"$1/util\" &&
                        echo '#include \"core/core.h\"' > \"$1/util/bad.c\" && sh \"$0\" \"$1\""
                 ${CMAKE_SOURCE_DIR}/tools/check_layers.sh ${TT_LAYERS_FIXTURE})
set_tests_properties(check_layers_detects PROPERTIES
                     PASS_REGULAR_EXPRESSION "src/util/bad.c:1: util/ includes core/")

# The core's own order: a copy of src/ whose engine includes the submission layer's header.
set(TT_CORE_FIXTURE ${CMAKE_CURRENT_BINARY_DIR}/check_core_fixture)
add_test(NAME check_layers_detects_core
         COMMAND sh -c "rm -rf \"$1\" && mkdir -p \"$1\" && cp -r \"$2\" \"$1/src\" &&
                        echo '#include \"core/coll.h\"' >> \"$1/src/core/engine.c\" &&
                        sh \"$0\" \"$1/src\""
                 ${CMAKE_SOURCE_DIR}/tools/check_layers.sh ${TT_CORE_FIXTURE} ${CMAKE_SOURCE_DIR}/src)
set_tests_properties(check_layers_detects_core PROPERTIES
                     PASS_REGULAR_EXPRESSION "core/engine.c \\(level 6\\) includes core/coll.h \\(level 2\\)")

set_tests_properties(check_symbols check_symbols_static check_layers check_tls_size check_symbols_detects
                     check_symbols_static_detects check_layers_detects check_layers_detects_core
                     PROPERTIES LABELS unit TIMEOUT 30)

# Bad input, table-driven: at least 150 cases of one bad argument each (every collective x
# every kind of argument, every config field, every integer variable), on one rank.
add_executable(api_bad_inputs tests/api_bad_inputs.c)
target_link_libraries(api_bad_inputs PRIVATE tutti)
target_include_directories(api_bad_inputs PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_compile_options(api_bad_inputs PRIVATE ${TUTTI_WARNINGS})
add_test(NAME api_bad_inputs COMMAND api_bad_inputs)
set_tests_properties(api_bad_inputs PROPERTIES LABELS api TIMEOUT 60)
