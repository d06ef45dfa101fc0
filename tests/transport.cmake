# Transport tests, built from the transport and util sources alone so they do not wait for the
# rest of the library: test_transport (two forked processes per scenario) and unit_team_map
# (mapping peers' memory files, refused where a load could raise SIGBUS).
file(GLOB TUTTI_UTIL_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/util/*.c)

function(tutti_transport_test name timeout)
  add_executable(${name} tests/${name}.c ${ARGN} ${TUTTI_UTIL_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  target_compile_options(${name} PRIVATE ${TUTTI_WARNINGS})
  target_link_libraries(${name} PRIVATE Threads::Threads rt)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS transport TIMEOUT ${timeout} SKIP_RETURN_CODE 77)
endfunction()

tutti_transport_test(test_transport 120 ${CMAKE_SOURCE_DIR}/src/transport/shm.c
                     ${CMAKE_SOURCE_DIR}/src/transport/tcp.c
                     ${CMAKE_SOURCE_DIR}/src/transport/self.c
                     ${CMAKE_SOURCE_DIR}/src/transport/transport.c)
tutti_transport_test(unit_team_map 60 ${CMAKE_SOURCE_DIR}/src/transport/team.c)
