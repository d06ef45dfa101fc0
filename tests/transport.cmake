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

set(test_transport_sources ${CMAKE_SOURCE_DIR}/src/transport/shm.c
    ${CMAKE_SOURCE_DIR}/src/transport/tcp.c ${CMAKE_SOURCE_DIR}/src/transport/tcp_setup.c
    ${CMAKE_SOURCE_DIR}/src/transport/self.c
    ${CMAKE_SOURCE_DIR}/src/transport/transport.c)
if(TUTTI_HAVE_UCX)
  list(APPEND test_transport_sources ${CMAKE_SOURCE_DIR}/src/transport/ucx.c
       ${CMAKE_SOURCE_DIR}/src/transport/ucx_setup.c)
endif()
tutti_transport_test(test_transport 120 ${test_transport_sources})
if(TUTTI_HAVE_UCX)
  target_compile_definitions(test_transport PRIVATE TUTTI_HAVE_UCX)
  target_include_directories(test_transport PRIVATE ${UCX_INCLUDE_DIRS})
  target_link_libraries(test_transport PRIVATE ${CMAKE_DL_LIBS})
endif()
tutti_transport_test(unit_team_map 60 ${CMAKE_SOURCE_DIR}/src/transport/team.c)

# The same scenarios over the UCX transport (labels transport and ucx), through UCX's TCP and
# its shared-memory transports; skipped (77) in a build without UCX. Over shared memory UCX
# cannot report a dead peer (the communicator's deadline does), so the kill scenarios run over
# TCP only.
add_test(NAME test_transport_ucx_tcp COMMAND test_transport ucx)
add_test(NAME test_transport_ucx_sm COMMAND test_transport --no-kill ucx)
set_tests_properties(test_transport_ucx_tcp PROPERTIES ENVIRONMENT "UCX_TLS=tcp")
set_tests_properties(test_transport_ucx_sm PROPERTIES ENVIRONMENT "UCX_TLS=sm")
set_tests_properties(test_transport_ucx_tcp test_transport_ucx_sm PROPERTIES
                     LABELS "transport;ucx" TIMEOUT 120 SKIP_RETURN_CODE 77 PROCESSORS 2)
