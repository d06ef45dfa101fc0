# CUDA tests (label cuda), in CUDA builds only (docs/cuda.md). Without a GPU the GPU programs
# exit 77 and CTest reports them skipped; the checks that need no GPU (the library links no
# CUDA library; it runs host-only when the driver is missing) run everywhere.
if(TUTTI_CUDA AND TARGET tutti-run)
  add_executable(gpu_matrix ${CMAKE_SOURCE_DIR}/tests/gpu/gpu_matrix.cu
                            ${CMAKE_SOURCE_DIR}/tests/harness.c)
  set_target_properties(gpu_matrix PROPERTIES CUDA_RUNTIME_LIBRARY Static)
  target_include_directories(gpu_matrix PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_compile_options(gpu_matrix PRIVATE
                         $<$<COMPILE_LANGUAGE:CUDA>:${TUTTI_CUDA_WARNINGS}>
                         $<$<COMPILE_LANGUAGE:C>:${TUTTI_WARNINGS}>)
  target_link_libraries(gpu_matrix PRIVATE tutti m)

  # The matrix on device buffers with 2, 3 and 4 ranks sharing GPU 0, and with the odd ranks
  # on the CPU (mixed communicators).
  foreach(n 2 3 4)
    add_test(NAME gpu_matrix_${n}
             COMMAND $<TARGET_FILE:tutti-run> -n ${n} --timeout 580 $<TARGET_FILE:gpu_matrix>)
    add_test(NAME gpu_matrix_mixed_${n}
             COMMAND $<TARGET_FILE:tutti-run> -n ${n} --timeout 580 $<TARGET_FILE:gpu_matrix>
                     --mixed)
    set_tests_properties(gpu_matrix_${n} gpu_matrix_mixed_${n} PROPERTIES LABELS cuda
                         TIMEOUT 600 SKIP_RETURN_CODE 77 PROCESSORS 2
                         ENVIRONMENT "TUTTI_TIMEOUT_MS=60000")
  endforeach()

  # The device-direct AllReduce (GPU kernels over CUDA IPC-mapped peer scratch, flags in device
  # memory): 2, 3 and 4 ranks sharing GPU 0 with a 64 KiB scratch (both algorithms, chunking),
  # and 3 ranks forced to one-shot, to two-shot. TUTTI_CUDA_DIRECT=2: init fails where the path
  # cannot be set up, so every device AllReduce of the test runs on it.
  add_executable(gpu_direct ${CMAKE_SOURCE_DIR}/tests/gpu/gpu_direct.cu
                            ${CMAKE_SOURCE_DIR}/tests/harness.c)
  set_target_properties(gpu_direct PROPERTIES CUDA_RUNTIME_LIBRARY Static)
  target_include_directories(gpu_direct PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_compile_options(gpu_direct PRIVATE
                         $<$<COMPILE_LANGUAGE:CUDA>:${TUTTI_CUDA_WARNINGS}>
                         $<$<COMPILE_LANGUAGE:C>:${TUTTI_WARNINGS}>)
  target_link_libraries(gpu_direct PRIVATE tutti m)
  foreach(n 2 3 4)
    add_test(NAME gpu_direct_${n}
             COMMAND $<TARGET_FILE:tutti-run> -n ${n} --timeout 280 $<TARGET_FILE:gpu_direct>)
    set_tests_properties(gpu_direct_${n} PROPERTIES ENVIRONMENT
                         "TUTTI_CUDA_DIRECT=2;TUTTI_CUDA_DIRECT_BYTES=65536;TUTTI_TIMEOUT_MS=60000")
  endforeach()
  add_test(NAME gpu_direct_oneshot_3
           COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 280 $<TARGET_FILE:gpu_direct>)
  set_tests_properties(gpu_direct_oneshot_3 PROPERTIES ENVIRONMENT
                       "TUTTI_CUDA_DIRECT=2;TUTTI_CUDA_ONESHOT_BYTES=1073741824")
  add_test(NAME gpu_direct_twoshot_3
           COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 280 $<TARGET_FILE:gpu_direct>)
  set_tests_properties(gpu_direct_twoshot_3 PROPERTIES ENVIRONMENT
                       "TUTTI_CUDA_DIRECT=2;TUTTI_CUDA_ONESHOT_BYTES=0")
  add_test(NAME gpu_direct_ring_3
           COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 280 $<TARGET_FILE:gpu_direct>
                   --allreduce)
  set_tests_properties(gpu_direct_ring_3 PROPERTIES ENVIRONMENT
                       "TUTTI_CUDA_DIRECT=2;TUTTI_CUDA_DIRECT_BYTES=65536;NCCL_ALGO=Ring")
  foreach(n 2 3)
    add_test(NAME gpu_direct_windows_${n}
             COMMAND $<TARGET_FILE:tutti-run> -n ${n} --timeout 280 $<TARGET_FILE:gpu_direct>
                     --windows)
    set_tests_properties(gpu_direct_windows_${n} PROPERTIES ENVIRONMENT
                         "TUTTI_CUDA_DIRECT=2;TUTTI_TIMEOUT_MS=60000")
  endforeach()
  set_tests_properties(gpu_direct_2 gpu_direct_3 gpu_direct_4 gpu_direct_oneshot_3
                       gpu_direct_twoshot_3 gpu_direct_ring_3 gpu_direct_windows_2 gpu_direct_windows_3
                       PROPERTIES LABELS cuda TIMEOUT 300
                       SKIP_RETURN_CODE 77 PROCESSORS 2)
  # Streams waiting for a failed peer run out, with real CUDA (fake_direct's failure tests
  # over the stand-in driver check the same without a GPU).
  foreach(cfg "abort;2" "dead;3" "third;3" "destroy;3")
    list(GET cfg 0 mode)
    list(GET cfg 1 n)
    add_test(NAME gpu_direct_${mode}_${n}
             COMMAND $<TARGET_FILE:tutti-run> -n ${n} --timeout 60 $<TARGET_FILE:gpu_direct>
                     --${mode})
    set_tests_properties(gpu_direct_${mode}_${n} PROPERTIES LABELS cuda TIMEOUT 90
      SKIP_RETURN_CODE 77 PROCESSORS 2
      ENVIRONMENT "TUTTI_CUDA_DIRECT=2;TUTTI_CUDA_DIRECT_BYTES=65536;TUTTI_TIMEOUT_MS=60000")
  endforeach()

  # tutti-perf's device mode, checked (-c 1), a few sizes: skipped without a GPU.
  add_test(NAME gpu_perf_check
           COMMAND $<TARGET_FILE:tutti-run> -n 2 --timeout 280 $<TARGET_FILE:tutti-perf> -G
                   -b 8 -e 1M -f 32 -c 1 -n 2 -w 1 -d all -o all)
  set_tests_properties(gpu_perf_check PROPERTIES LABELS cuda TIMEOUT 300 SKIP_RETURN_CODE 77
                       PROCESSORS 2)

  # The device-direct path end to end without a GPU, over a stand-in driver (tests/gpu/
  # fake_cuda.c: "device memory" in shared memory files, streams as threads, the kernels' host
  # builds): the init exchange, the flag protocol across processes, chunking, one-shot (4 ranks
  # forced), two-shot (3 ranks forced), both (2 ranks), every dtype x op, checked bit for bit.
  add_library(tutti_fake_cuda SHARED ${CMAKE_SOURCE_DIR}/tests/gpu/fake_cuda.c)
  target_include_directories(tutti_fake_cuda PRIVATE ${CMAKE_SOURCE_DIR}/src)
  foreach(inc ${CUDAToolkit_INCLUDE_DIRS})
    target_compile_options(tutti_fake_cuda PRIVATE "-isystem${inc}")
  endforeach()
  target_compile_options(tutti_fake_cuda PRIVATE ${TUTTI_WARNINGS} -fvisibility=hidden)
  target_link_libraries(tutti_fake_cuda PRIVATE Threads::Threads m)
  add_executable(fake_direct ${CMAKE_SOURCE_DIR}/tests/gpu/fake_direct.c
                             ${CMAKE_SOURCE_DIR}/tests/harness.c)
  target_include_directories(fake_direct PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_compile_options(fake_direct PRIVATE ${TUTTI_WARNINGS})
  target_link_libraries(fake_direct PRIVATE tutti m ${CMAKE_DL_LIBS})
  foreach(cfg "2;262144" "3;0" "4;1073741824")
    list(GET cfg 0 n)
    list(GET cfg 1 oneshot)
    add_test(NAME cuda_direct_fake_${n}
             COMMAND $<TARGET_FILE:tutti-run> -n ${n} --timeout 200 $<TARGET_FILE:fake_direct>)
    set_tests_properties(cuda_direct_fake_${n} PROPERTIES LABELS cuda TIMEOUT 240 PROCESSORS 2
      ENVIRONMENT "TUTTI_CUDA_LIBRARY=$<TARGET_FILE:tutti_fake_cuda>;TUTTI_CUDA_DIRECT=2;TUTTI_CUDA_DIRECT_BYTES=65536;TUTTI_CUDA_ONESHOT_BYTES=${oneshot};TUTTI_TIMEOUT_MS=60000")
  endforeach()
  # The device ring (NCCL_ALGO=Ring), AllReduce alone; a 64 KiB scratch takes 70001 elements in
  # several chunks, and 2 ranks give the ring no forwarding step.
  foreach(n 2 3 4)
    set(what --allreduce)
    if(n EQUAL 3)
      set(what "") # everything: the ring between every other collective and Send/Recv
    endif()
    add_test(NAME cuda_direct_fake_ring_${n}
             COMMAND $<TARGET_FILE:tutti-run> -n ${n} --timeout 200 $<TARGET_FILE:fake_direct> ${what})
    set_tests_properties(cuda_direct_fake_ring_${n} PROPERTIES LABELS cuda TIMEOUT 240 PROCESSORS 2
      ENVIRONMENT "TUTTI_CUDA_LIBRARY=$<TARGET_FILE:tutti_fake_cuda>;TUTTI_CUDA_DIRECT=2;TUTTI_CUDA_DIRECT_BYTES=65536;NCCL_ALGO=Ring;TUTTI_TIMEOUT_MS=60000")
  endforeach()
  # Streams waiting for a failed peer are released: by ncclCommAbort from another thread
  # (abort), by the device watchdog when the peer's process ends (dead), and a rank released by
  # a peer's abort learns that its result is void (third). fake_direct's run_failure.
  foreach(cfg "abort;2" "dead;3" "third;3" "destroy;3")
    list(GET cfg 0 mode)
    list(GET cfg 1 n)
    add_test(NAME cuda_direct_fake_${mode}_${n}
             COMMAND $<TARGET_FILE:tutti-run> -n ${n} --timeout 60 $<TARGET_FILE:fake_direct> --${mode})
    set_tests_properties(cuda_direct_fake_${mode}_${n} PROPERTIES LABELS cuda TIMEOUT 90 PROCESSORS 2
      ENVIRONMENT "TUTTI_CUDA_LIBRARY=$<TARGET_FILE:tutti_fake_cuda>;TUTTI_CUDA_DIRECT=2;TUTTI_CUDA_DIRECT_BYTES=65536;TUTTI_TIMEOUT_MS=60000")
  endforeach()
  # Symmetric windows on device memory: AllReduce reads and writes the peers' windows in place.
  # The stand-in puts every rank on one GPU, so rank 0 folds it all; _split_ forces a share each.
  add_test(NAME cuda_direct_fake_windows_split_3
           COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 200 $<TARGET_FILE:fake_direct> --windows)
  set_tests_properties(cuda_direct_fake_windows_split_3 PROPERTIES LABELS cuda TIMEOUT 240 PROCESSORS 2
    ENVIRONMENT "TUTTI_CUDA_LIBRARY=$<TARGET_FILE:tutti_fake_cuda>;TUTTI_CUDA_DIRECT=2;TUTTI_CUDA_WINDOW_FOLD=2;TUTTI_TIMEOUT_MS=60000")
  foreach(n 2 3)
    add_test(NAME cuda_direct_fake_windows_${n}
             COMMAND $<TARGET_FILE:tutti-run> -n ${n} --timeout 200 $<TARGET_FILE:fake_direct> --windows)
    set_tests_properties(cuda_direct_fake_windows_${n} PROPERTIES LABELS cuda TIMEOUT 240 PROCESSORS 2
      ENVIRONMENT "TUTTI_CUDA_LIBRARY=$<TARGET_FILE:tutti_fake_cuda>;TUTTI_CUDA_DIRECT=2;TUTTI_CUDA_DIRECT_BYTES=65536;TUTTI_TIMEOUT_MS=60000")
  endforeach()
  # A mixed communicator (odd ranks on host buffers): the path is off, everything is staged.
  add_test(NAME cuda_direct_fake_mixed_3
           COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 200 $<TARGET_FILE:fake_direct> --mixed)
  set_tests_properties(cuda_direct_fake_mixed_3 PROPERTIES LABELS cuda TIMEOUT 240 PROCESSORS 2
    ENVIRONMENT "TUTTI_CUDA_LIBRARY=$<TARGET_FILE:tutti_fake_cuda>;TUTTI_CUDA_DIRECT=1;TUTTI_TIMEOUT_MS=60000")

  # TUTTI_CUDA_DIRECT=2 without GPU ranks: init fails with the reason; 1 falls back (no GPU).
  add_test(NAME cuda_direct_required_off
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/gpu/direct_required.sh $<TARGET_FILE:tutti-run>
                   $<TARGET_FILE:tutti-perf>)
  set_tests_properties(cuda_direct_required_off PROPERTIES LABELS "cuda;unit" TIMEOUT 120
                       PROCESSORS 2)

  # Drop-in on the GPU: compiled against NVIDIA's nccl.h from the toolkit and linked with
  # -lnccl against lib/nccl-compat (never against libtutti), device buffers on a CUDA stream,
  # 3 ranks on GPU 0.
  if(TARGET nccl_compat AND EXISTS ${CUDAToolkit_INCLUDE_DIRS}/nccl.h)
    add_executable(abi_gpu ${CMAKE_SOURCE_DIR}/tests/gpu/abi_gpu.cu)
    set_target_properties(abi_gpu PROPERTIES CUDA_RUNTIME_LIBRARY Static
                          BUILD_RPATH ${TUTTI_NCCL_COMPAT_DIR})
    target_compile_options(abi_gpu PRIVATE ${TUTTI_CUDA_WARNINGS})
    target_link_libraries(abi_gpu PRIVATE "-L${TUTTI_NCCL_COMPAT_DIR}" "-lnccl")
    add_dependencies(abi_gpu nccl_compat)
    add_test(NAME gpu_abi_3
             COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 100 $<TARGET_FILE:abi_gpu>)
    set_tests_properties(gpu_abi_3 PROPERTIES LABELS cuda TIMEOUT 120 SKIP_RETURN_CODE 77
                         PROCESSORS 2 ENVIRONMENT
                         "TUTTI_TIMEOUT_MS=60000;LD_LIBRARY_PATH=${TUTTI_NCCL_COMPAT_DIR}")
  endif()

  # libtutti.so names no CUDA library: the same file runs on machines without CUDA.
  add_test(NAME cuda_no_link
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/gpu/check_no_cuda_link.sh
                   $<TARGET_FILE:tutti> $<TARGET_FILE_DIR:tutti>/lib/nccl-compat/libnccl.so.2)
  set_tests_properties(cuda_no_link PROPERTIES LABELS "cuda;unit" TIMEOUT 30)

  # With the driver asked for but absent (or unusable), the CUDA build runs host-only: a checked
  # AllReduce on host buffers passes, the reason is logged once. Where a driver and a GPU exist
  # the same run uses them for nothing (host buffers) and passes too.
  add_test(NAME cuda_fallback_host_only
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/gpu/fallback.sh $<TARGET_FILE:tutti-run>
                   $<TARGET_FILE:tutti-perf>)
  set_tests_properties(cuda_fallback_host_only PROPERTIES LABELS "cuda;unit" TIMEOUT 60
                       PROCESSORS 2)
endif()

# The device reduction kernels: their arithmetic on the host against the host kernels (runs
# everywhere), and the kernels themselves on a GPU (skipped without one).
if(TUTTI_CUDA)
  add_executable(unit_cuda_elementwise ${CMAKE_SOURCE_DIR}/tests/gpu/unit_cuda_elementwise.c)
  target_include_directories(unit_cuda_elementwise PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(unit_cuda_elementwise PRIVATE ${TUTTI_WARNINGS})
  target_link_libraries(unit_cuda_elementwise PRIVATE tutti_internal)
  add_test(NAME unit_cuda_elementwise COMMAND unit_cuda_elementwise)
  set_tests_properties(unit_cuda_elementwise PROPERTIES LABELS "cuda;unit" TIMEOUT 60)

  add_executable(gpu_reduce ${CMAKE_SOURCE_DIR}/tests/gpu/gpu_reduce.c)
  target_include_directories(gpu_reduce PRIVATE ${CMAKE_SOURCE_DIR}/src)
  foreach(inc ${CUDAToolkit_INCLUDE_DIRS})
    target_compile_options(gpu_reduce PRIVATE "-isystem${inc}")
  endforeach()
  target_compile_options(gpu_reduce PRIVATE ${TUTTI_WARNINGS})
  target_link_libraries(gpu_reduce PRIVATE tutti_internal CUDA::cudart_static)
  add_test(NAME gpu_reduce COMMAND gpu_reduce)
  set_tests_properties(gpu_reduce PROPERTIES LABELS cuda TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()

# Device peer memory (CUDA IPC) between ranks sharing a GPU.
if(TUTTI_CUDA AND TARGET tutti-run)
  add_executable(gpu_ipc ${CMAKE_SOURCE_DIR}/tests/gpu/gpu_ipc.c)
  target_include_directories(gpu_ipc PRIVATE ${CMAKE_SOURCE_DIR}/src)
  foreach(inc ${CUDAToolkit_INCLUDE_DIRS})
    target_compile_options(gpu_ipc PRIVATE "-isystem${inc}")
  endforeach()
  target_compile_options(gpu_ipc PRIVATE ${TUTTI_WARNINGS})
  target_link_libraries(gpu_ipc PRIVATE tutti_internal CUDA::cudart_static)
  add_test(NAME gpu_ipc_3
           COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 110 $<TARGET_FILE:gpu_ipc>)
  set_tests_properties(gpu_ipc_3 PROPERTIES LABELS cuda TIMEOUT 120 SKIP_RETURN_CODE 77
                       PROCESSORS 2)
endif()

# The window fold kernel's shape against cudaMemcpy, in one process (bench/gpu_fold.cu): a
# benchmark whose every variant's result is checked, so that it runs as a test on a GPU (64 MiB
# per buffer, a few calls per row) and skips without one.
if(TUTTI_CUDA)
  add_executable(gpu_fold ${CMAKE_SOURCE_DIR}/bench/gpu_fold.cu)
  set_target_properties(gpu_fold PROPERTIES CUDA_RUNTIME_LIBRARY Static)
  target_compile_options(gpu_fold PRIVATE ${TUTTI_CUDA_WARNINGS})
  add_test(NAME gpu_fold COMMAND gpu_fold 64 4)
  set_tests_properties(gpu_fold PROPERTIES LABELS cuda TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
