# NCCL 2.30's parameter API (label api): tests/param_api.c, compiled against a 2.30-style nccl.h
# (tests/nccl-2.30/nccl.h) as a program written for NCCL 2.30 would be, lists every parameter
# through ncclParamGetAllParameterKeys and ncclParamGetParameter, checks the typed accessors and
# the misuse errors; tests/test_param_api.sh compares its listing with tutti-info's.
add_executable(param_api tests/param_api.c)
target_include_directories(param_api BEFORE PRIVATE ${CMAKE_SOURCE_DIR}/tests/nccl-2.30
                           ${CMAKE_SOURCE_DIR}/tests)
target_link_libraries(param_api PRIVATE tutti)
target_compile_options(param_api PRIVATE ${TUTTI_WARNINGS})
add_test(NAME param_api
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/test_param_api.sh $<TARGET_FILE:param_api>
                 $<TARGET_FILE:tutti-info>)
set_tests_properties(param_api PROPERTIES LABELS api TIMEOUT 30)
