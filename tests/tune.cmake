# Unit test of algorithm selection: NCCL_ALGO / NCCL_PROTO parsing, the cost model's shape and the
# choices it makes. Built from the selection module and the files it needs (tt_coll_name lives in
# algo/ring.c; logging and parameters in util), so it does not wait on the rest of the library.
add_executable(unit_tune tests/unit_tune.c src/algo/tune.c src/algo/tune_env.c src/algo/ring.c src/algo/tree.c src/util/log.c
               src/util/param.c)
target_include_directories(unit_tune PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(unit_tune PRIVATE ${TUTTI_WARNINGS})
target_link_libraries(unit_tune PRIVATE Threads::Threads m)
add_test(NAME unit_tune COMMAND unit_tune)
set_tests_properties(unit_tune PROPERTIES LABELS unit TIMEOUT 60)
