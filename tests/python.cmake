# The Python bindings (python/tutti) under Debian's /usr/bin/python3 (label python): every
# collective, datatype and operator bit for bit on 2 and 3 ranks, the rest of the API on 2 and
# 3 ranks, one process without a launcher, and a pip install into a temporary directory. The
# scripts skip (77) with a line saying why when that interpreter or numpy is missing.
# run.sh gives tutti-run a --timeout well inside each test's TIMEOUT (100 s; 240 s for
# tutti.torch's), so a hang fails early with every rank's Python stacks (faulthandler on SIGTERM).
# Not in sanitizer builds: an ASan-instrumented libtutti.so cannot be loaded into an
# uninstrumented interpreter (the ASan runtime must come first), and the Python layer adds
# nothing for the sanitizers to check that the C tests do not.
if(TUTTI_SANITIZE)
  return()
endif()
set(TT_PY_RUN sh ${CMAKE_SOURCE_DIR}/python/tests/run.sh $<TARGET_FILE:tutti-run>)
set(TT_PY_DIR ${CMAKE_SOURCE_DIR}/python/tests)
add_test(NAME python_local COMMAND ${TT_PY_RUN} 0 ${TT_PY_DIR}/test_local.py)
set(TT_PY_TESTS python_local)
foreach(n 2 3)
  add_test(NAME python_colls_${n} COMMAND ${TT_PY_RUN} ${n} ${TT_PY_DIR}/test_colls.py)
  add_test(NAME python_api_${n} COMMAND ${TT_PY_RUN} ${n} ${TT_PY_DIR}/test_api.py)
  list(APPEND TT_PY_TESTS python_colls_${n} python_api_${n})
endforeach()
# ncclAvg and PreMulSum on float16 give NCCL's bits whichever algorithm runs them (each rank's
# product rounded to the datatype before the sum): one job per algorithm at 3 ranks.
foreach(algo Ring Tree OneShot Direct)
  add_test(NAME python_premul_rounding_${algo}
           COMMAND ${TT_PY_RUN} 3 ${TT_PY_DIR}/test_premul_rounding.py)
  set_tests_properties(python_premul_rounding_${algo} PROPERTIES LABELS python TIMEOUT 120
                       SKIP_RETURN_CODE 77
                       ENVIRONMENT "TUTTI_LIBRARY=$<TARGET_FILE:tutti>;NCCL_ALGO=${algo}")
endforeach()
add_test(NAME python_install
         COMMAND sh ${TT_PY_DIR}/test_install.sh $<TARGET_FILE:tutti-run> $<TARGET_FILE:tutti>)
list(APPEND TT_PY_TESTS python_install)
set_tests_properties(${TT_PY_TESTS} PROPERTIES LABELS python TIMEOUT 120 SKIP_RETURN_CODE 77
                     ENVIRONMENT "TUTTI_LIBRARY=$<TARGET_FILE:tutti>")

# tutti.torch, the c10d backend, where python3-torch, libtorch-dev, pybind11-dev and g++ are
# installed (tools/install-deps.sh installs them; skipped, 77, without them). Its C++ shim is
# compiled into the build tree on the first run, which takes a minute or two; the tests share
# that build (torch's extension loader locks it). python_ddp trains examples/pytorch's CNN for a
# few steps at 2 ranks with tutti (twice) and gloo and compares the parameters bit for bit;
# python_ddp_soak is the acceptance run: 100 steps at 2 and 4 ranks, every Tutti run repeated.
set(TT_TORCH_ENV "TUTTI_LIBRARY=$<TARGET_FILE:tutti>;TUTTI_TORCH_BUILD_DIR=${CMAKE_BINARY_DIR}/tutti-torch")
add_test(NAME python_torch_2 COMMAND ${TT_PY_RUN} 2 ${TT_PY_DIR}/test_torch.py)
add_test(NAME python_torch_3 COMMAND ${TT_PY_RUN} 3 ${TT_PY_DIR}/test_torch.py)
# Exit while a callback on a completion thread drops a group's last reference.
add_test(NAME python_torch_exit_2 COMMAND ${TT_PY_RUN} 2 ${TT_PY_DIR}/test_torch_exit.py)
# The same across hosts' transport (TCP), where an all_to_all is sends and receives: an irecv
# posted across it must not take its block.
add_test(NAME python_torch_tcp_3 COMMAND ${TT_PY_RUN} 3 ${TT_PY_DIR}/test_torch.py)
set_tests_properties(python_torch_tcp_3 PROPERTIES LABELS python TIMEOUT 300
                     SKIP_RETURN_CODE 77 ENVIRONMENT
                     "${TT_TORCH_ENV};NCCL_SHM_DISABLE=1;TUTTI_TORCH_TEST_ONLY=p2p_beside_all_to_all")
add_test(NAME python_ddp
         COMMAND ${TT_PY_RUN} 0 ${TT_PY_DIR}/test_ddp.py $<TARGET_FILE:tutti-run> 5 4 0 2)
set_tests_properties(python_torch_2 python_torch_3 python_torch_exit_2 python_ddp PROPERTIES
                     LABELS python
                     TIMEOUT 600 SKIP_RETURN_CODE 77 ENVIRONMENT "${TT_TORCH_ENV}")
add_test(NAME python_ddp_soak
         COMMAND ${TT_PY_RUN} 0 ${TT_PY_DIR}/test_ddp.py $<TARGET_FILE:tutti-run> 100 16 1 2 4)
set_tests_properties(python_ddp_soak PROPERTIES LABELS "python;soak" TIMEOUT 1200
                     SKIP_RETURN_CODE 77 ENVIRONMENT "${TT_TORCH_ENV}")

# Launch: what tutti-run sets for torch.distributed (MASTER_ADDR, MASTER_PORT, RANK,
# WORLD_SIZE, LOCAL_RANK) with Tutti's own init still at NCCL_COMM_ID, and
# tutti.launch_env() deriving the same under Open MPI's mpirun (skipped, 77, without it); each
# ends with dist.init_process_group("tutti") through env:// and an exact all_reduce (skipped,
# 77, after the Tutti part when torch is missing).
add_test(NAME python_launch_tutti_run
         COMMAND ${TT_PY_RUN} 2 ${TT_PY_DIR}/test_launch.py tutti-run)
add_test(NAME python_launch_mpirun COMMAND sh ${TT_PY_DIR}/launch_mpirun.sh 2)
set_tests_properties(python_launch_tutti_run python_launch_mpirun PROPERTIES LABELS python
                     TIMEOUT 600 SKIP_RETURN_CODE 77 ENVIRONMENT "${TT_TORCH_ENV}")
