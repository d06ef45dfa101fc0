# The timeline trace (label unit): tests/trace_ops.c as 4 ranks under tutti-run with
# TUTTI_TRACE_FILE set, the files merged and drawn by tools/tutti-trace, and the result checked
# by tests/test_trace.py (well-formed events, steps inside their operations, sequence numbers in
# order, the same collectives on every rank, an SVG with a bar per event, and a Chromium
# screenshot of the HTML where Chromium is installed). Skipped (77) without Debian's python3.
add_executable(trace_ops tests/trace_ops.c)
target_link_libraries(trace_ops PRIVATE tutti)
target_include_directories(trace_ops PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_compile_options(trace_ops PRIVATE ${TUTTI_WARNINGS})
add_test(NAME trace_timeline
         COMMAND sh -c "[ -x /usr/bin/python3 ] || { echo 'skipped: no /usr/bin/python3'; exit 77; }
                        exec /usr/bin/python3 \"$@\"" sh
                 ${CMAKE_SOURCE_DIR}/tests/test_trace.py $<TARGET_FILE:tutti-run>
                 $<TARGET_FILE:trace_ops> ${CMAKE_SOURCE_DIR}/tools/tutti-trace
                 ${CMAKE_BINARY_DIR}/trace-test)
set_tests_properties(trace_timeline PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77
                     PROCESSORS 2)
# The counters without a trace (TUTTI_STATS=1) and without either (tuttiCommStats refuses):
# tests/trace_ops.c checks the rows of each rank.
add_test(NAME stats_counters
         COMMAND sh -c "out=$(\"$0\" -n 4 --timeout 60 -x TUTTI_STATS=1 -x NCCL_DEBUG=INFO \
                               -x NCCL_DEBUG_SUBSYS=INIT \"$1\" 2>&1) || { echo \"$out\"; exit 1; }
                        echo \"$out\" | grep 'stats:'
                        echo \"$out\" | grep -q 'rank 3 stats: AllReduce' ||
                            { echo 'no stats line at destroy'; exit 1; }"
                 $<TARGET_FILE:tutti-run> $<TARGET_FILE:trace_ops>)
add_test(NAME stats_off COMMAND $<TARGET_FILE:tutti-run> -n 2 --timeout 60 $<TARGET_FILE:trace_ops>)
set_tests_properties(stats_counters PROPERTIES LABELS api TIMEOUT 90 PROCESSORS 2)
set_tests_properties(stats_off PROPERTIES LABELS api TIMEOUT 90)
# NCCL_DEBUG_FILE's %h and %p, and a pattern too long for the file name (tests/test_debug_file.sh).
add_test(NAME debug_file
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/test_debug_file.sh $<TARGET_FILE:tutti-run>
                 $<TARGET_FILE:trace_ops> ${CMAKE_BINARY_DIR}/debug-file-test)
set_tests_properties(debug_file PROPERTIES LABELS unit TIMEOUT 120 PROCESSORS 2)
# A process that exits without destroying its communicator still writes its trace (an exit
# handler), as valid JSON with its events.
add_test(NAME trace_at_exit
         COMMAND sh -c "[ -x /usr/bin/python3 ] || { echo 'skipped: no /usr/bin/python3'; exit 77; }
                        rm -rf \"$2\" && mkdir -p \"$2\" || exit 1
                        \"$0\" -n 2 --timeout 60 -x TRACE_OPS_EXIT_ALIVE=1 \
                          -x TUTTI_TRACE_FILE=\"$2/t-%r.json\" \"$1\" || exit 1
                        exec /usr/bin/python3 -c 'import json, sys
for r in (0, 1):
    d = json.load(open(sys.argv[1] + \"/t-%d.json\" % r))
    n = d[\"otherData\"][\"events\"]
    assert n > 0, (r, n)
    print(\"rank\", r, \"wrote\", n, \"events at exit\")' \"$2\""
                 $<TARGET_FILE:tutti-run> $<TARGET_FILE:trace_ops> ${CMAKE_BINARY_DIR}/trace-exit-test)
set_tests_properties(trace_at_exit PROPERTIES LABELS unit TIMEOUT 90 SKIP_RETURN_CODE 77)
