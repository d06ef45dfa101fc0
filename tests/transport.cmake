# Transport tests: two forked processes per scenario, built from the transport and util sources
# alone so they do not wait for the rest of the library.
file(GLOB TUTTI_UTIL_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/util/*.c)
add_executable(test_transport tests/test_transport.c ${CMAKE_SOURCE_DIR}/src/transport/shm.c
               ${CMAKE_SOURCE_DIR}/src/transport/tcp.c ${TUTTI_UTIL_SOURCES})
target_include_directories(test_transport PRIVATE ${CMAKE_SOURCE_DIR}/src
                           ${CMAKE_SOURCE_DIR}/include)
target_compile_options(test_transport PRIVATE ${TUTTI_WARNINGS})
target_link_libraries(test_transport PRIVATE Threads::Threads rt)
add_test(NAME test_transport COMMAND test_transport)
set_tests_properties(test_transport PROPERTIES LABELS transport TIMEOUT 120 SKIP_RETURN_CODE 77)

# Mapping peers' memory files (transport/host.c): refused where a load could raise SIGBUS.
add_executable(unit_host_map tests/unit_host_map.c ${CMAKE_SOURCE_DIR}/src/transport/host.c
               ${TUTTI_UTIL_SOURCES})
target_include_directories(unit_host_map PRIVATE ${CMAKE_SOURCE_DIR}/src
                           ${CMAKE_SOURCE_DIR}/include)
target_compile_options(unit_host_map PRIVATE ${TUTTI_WARNINGS})
target_link_libraries(unit_host_map PRIVATE Threads::Threads rt)
add_test(NAME unit_host_map COMMAND unit_host_map)
set_tests_properties(unit_host_map PROPERTIES LABELS transport TIMEOUT 60 SKIP_RETURN_CODE 77)
