# Failure handling through the public API: deadlines at init and in collectives.
add_executable(fault_deadline tests/fault_deadline.c)
target_link_libraries(fault_deadline PRIVATE tutti)
target_compile_options(fault_deadline PRIVATE ${TUTTI_WARNINGS})
add_test(NAME fault_deadline COMMAND fault_deadline)
set_tests_properties(fault_deadline PROPERTIES LABELS fault TIMEOUT 60)
