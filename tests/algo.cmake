# Pure schedule tests: the algorithms run against a simulated ring, no transport.
add_executable(unit_ring tests/unit_ring.c src/algo/ring.c)
target_include_directories(unit_ring PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(unit_ring PRIVATE ${TUTTI_WARNINGS})
add_test(NAME unit_ring COMMAND unit_ring)
set_tests_properties(unit_ring PROPERTIES LABELS unit TIMEOUT 120)
