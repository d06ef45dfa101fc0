# tutti-run (tests/test_launcher.sh, one CTest test per case) and the launcher environment
# detection behind tuttiCommInitFromEnv (tests/test_env_detect.c). The detection test builds
# its own copy of env_detect.c and util/, so it does not wait for the rest of the library.
foreach(case env tag fail signal forward orphans timeout multinode usage fdlimit drain
             stopped)
  add_test(NAME launcher_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/test_launcher.sh $<TARGET_FILE:tutti-run> ${case})
  set_tests_properties(launcher_${case} PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77)
endforeach()

file(GLOB TUTTI_UTIL_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/util/*.c)
add_executable(test_env_detect tests/test_env_detect.c src/core/env_detect.c
               ${TUTTI_UTIL_SOURCES})
target_include_directories(test_env_detect PRIVATE ${CMAKE_SOURCE_DIR}/src
                           ${CMAKE_SOURCE_DIR}/include)
target_compile_options(test_env_detect PRIVATE ${TUTTI_WARNINGS})
target_link_libraries(test_env_detect PRIVATE Threads::Threads m)
add_test(NAME env_detect COMMAND test_env_detect)
set_tests_properties(env_detect PROPERTIES LABELS unit TIMEOUT 60)

# tuttiCommInitFromEnv end to end: under tutti-run, with no launcher at all, and with the
# variables of torchrun, single-host mpirun and srun (the rendezvous file) and of Hydra without
# an address (every rank must fail cleanly).
add_executable(test_env_init tests/test_env_init.c)
target_link_libraries(test_env_init PRIVATE tutti)
target_compile_options(test_env_init PRIVATE ${TUTTI_WARNINGS})
add_test(NAME env_init_tutti_run
         COMMAND $<TARGET_FILE:tutti-run> -n 3 -x TUTTI_TIMEOUT_MS=30000
                 $<TARGET_FILE:test_env_init>)
add_test(NAME env_init_alone COMMAND test_env_init)
set(TT_ENV_INIT_TESTS env_init_tutti_run env_init_alone)
foreach(mode torchrun ompi slurm hydra)
  add_test(NAME env_init_${mode} COMMAND test_env_init spawn ${mode} 3)
  list(APPEND TT_ENV_INIT_TESTS env_init_${mode})
endforeach()
set_tests_properties(${TT_ENV_INIT_TESTS} PROPERTIES LABELS api TIMEOUT 60)
