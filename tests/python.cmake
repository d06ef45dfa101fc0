# The Python bindings (python/tutti) under Debian's /usr/bin/python3: every collective, datatype
# and operator bit for bit on 2 and 3 ranks, the rest of the API, and a pip install into a
# temporary directory. python/tests/run.sh skips (77) when that interpreter or numpy is missing.
set(TT_PY_RUN sh ${CMAKE_SOURCE_DIR}/python/tests/run.sh $<TARGET_FILE:tutti-run>)
set(TT_PY_DIR ${CMAKE_SOURCE_DIR}/python/tests)
add_test(NAME python_colls_2 COMMAND ${TT_PY_RUN} 2 ${TT_PY_DIR}/test_colls.py)
add_test(NAME python_colls_3 COMMAND ${TT_PY_RUN} 3 ${TT_PY_DIR}/test_colls.py)
set(TT_PY_TESTS python_colls_2 python_colls_3)
set_tests_properties(${TT_PY_TESTS} PROPERTIES LABELS python TIMEOUT 120 SKIP_RETURN_CODE 77
                     ENVIRONMENT "TUTTI_LIBRARY=$<TARGET_FILE:tutti>")
