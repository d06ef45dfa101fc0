# Topology and placement (label unit): tutti-info's counts against lstopo's on this machine and
# on a synthetic one (tests/test_topo_lstopo.sh), and tutti-run's placement rules on synthetic
# two-package machines, given as hwloc synthetic descriptions and as an XML file that lstopo
# writes (tests/unit_topo_place.c), and tutti-run --bind against tutti-info --placement
# (tests/test_topo_bind.sh). Skipped (77) without hwloc or lstopo.
add_executable(unit_topo_place tests/unit_topo_place.c)
target_link_libraries(unit_topo_place PRIVATE tutti_topo)
target_include_directories(unit_topo_place PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_compile_options(unit_topo_place PRIVATE ${TUTTI_WARNINGS})
set(TT_TOPO_CASES
    "two_packages_one_numa|pack:2 numa:1 core:4 pu:2|2 2 8 16"
    "two_packages_two_numa|pack:2 numa:2 core:3 pu:1|2 4 12 12"
    "one_package|pack:1 numa:1 core:6 pu:2|1 1 6 12")
foreach(c ${TT_TOPO_CASES})
  string(REPLACE "|" ";" parts "${c}")
  list(GET parts 0 name)
  list(GET parts 1 desc)
  list(GET parts 2 expect)
  add_test(NAME topo_place_${name} COMMAND unit_topo_place)
  set_tests_properties(topo_place_${name} PROPERTIES LABELS unit TIMEOUT 30
                       SKIP_RETURN_CODE 77
                       ENVIRONMENT "TUTTI_TOPO_SYNTHETIC=${desc};TOPO_EXPECT=${expect}")
endforeach()
add_test(NAME topo_place_xml
         COMMAND sh -c "command -v lstopo-no-graphics >/dev/null || { echo 'skipped: no lstopo'; exit 77; }
                        lstopo-no-graphics -f -i 'pack:2 numa:1 core:4 pu:2' \"$1\" &&
                        TUTTI_TOPO_XML=\"$1\" TOPO_EXPECT='2 2 8 16' \"$0\""
                 $<TARGET_FILE:unit_topo_place> ${CMAKE_BINARY_DIR}/topo-two-packages.xml)
add_test(NAME topo_lstopo
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/test_topo_lstopo.sh $<TARGET_FILE:tutti-info>)
set_tests_properties(topo_place_xml topo_lstopo PROPERTIES LABELS unit TIMEOUT 30
                     SKIP_RETURN_CODE 77)
add_test(NAME topo_bind
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/test_topo_bind.sh $<TARGET_FILE:tutti-run>
                 $<TARGET_FILE:tutti-info>)
set_tests_properties(topo_bind PROPERTIES LABELS unit TIMEOUT 30)
