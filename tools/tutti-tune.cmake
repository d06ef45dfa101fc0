# tutti-tune: prints the selection cost model's estimates and choices (docs/tuning.md's tables).
add_executable(tutti-tune tools/tutti-tune.c)
target_link_libraries(tutti-tune PRIVATE tutti_internal m)
target_include_directories(tutti-tune PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_compile_options(tutti-tune PRIVATE ${TUTTI_WARNINGS})
