# Pure schedule tests: the algorithms run against a simulated ring, no transport. They link the
# library's objects, since an algorithm is bound through the table that names them all.
add_executable(unit_ring tests/unit_ring.c $<TARGET_OBJECTS:tutti_obj>)
target_link_libraries(unit_ring PRIVATE Threads::Threads rt m ${TUTTI_LIB_DEPS})
target_include_directories(unit_ring PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(unit_ring PRIVATE ${TUTTI_WARNINGS})
add_test(NAME unit_ring COMMAND unit_ring)
set_tests_properties(unit_ring PROPERTIES LABELS unit TIMEOUT 120)

# The Tree schedules, simulated with symbolic values: every rank count 2..40, every root.
add_executable(unit_tree tests/unit_tree.c $<TARGET_OBJECTS:tutti_obj>)
target_link_libraries(unit_tree PRIVATE Threads::Threads rt m ${TUTTI_LIB_DEPS})
target_include_directories(unit_tree PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(unit_tree PRIVATE ${TUTTI_WARNINGS})
add_test(NAME unit_tree COMMAND unit_tree)
set_tests_properties(unit_tree PROPERTIES LABELS unit TIMEOUT 120)
