# cmake --install: what a user of the installed Tutti gets, laid out by GNUInstallDirs.
#   include/            nccl.h, tutti.h
#   lib/                libtutti.so.0 (and its namelink), libtutti.a
#   lib/tutti/nccl-compat/
#                       libnccl.so.2, for LD_LIBRARY_PATH only: a private directory, so that
#                       installing Tutti never replaces NVIDIA's libnccl.so.2 for other programs
#   lib/pkgconfig/      tutti.pc
#   lib/cmake/Tutti/    find_package(Tutti): Tutti::tutti, Tutti::tutti_static, Tutti::nccl_compat
#   bin/                tutti-run, tutti-perf, tutti-info, tutti-tune
#   share/man/man1/     their manual pages (docs/man/*.1)
#   share/doc/tutti/    README.md and docs/*.md
# Every rule names one of three components, which cmake/package.cmake turns into the Debian
# packages libtutti0 (lib), libtutti-dev (dev) and tutti (tools).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TUTTI_COMPAT_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/tutti/nccl-compat)
set(TUTTI_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Tutti)

# Consumers of the installed targets find the headers in include/; the compat library carries
# them too, so that a CMake project may link Tutti::nccl_compat alone.
foreach(t tutti tutti_static)
  target_include_directories(${t} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()
target_include_directories(nccl_compat INTERFACE
                           $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(tutti_static PROPERTIES EXPORT_NAME tutti_static)
set_target_properties(nccl_compat PROPERTIES EXPORT_NAME nccl_compat)
# The installed tools find libtutti.so.0 next to them, wherever the tree was installed.
set_target_properties(tutti-perf PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")

install(TARGETS tutti EXPORT TuttiTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev)
install(TARGETS nccl_compat EXPORT TuttiTargets
        LIBRARY DESTINATION ${TUTTI_COMPAT_INSTALL_DIR} COMPONENT lib NAMELINK_COMPONENT dev)
install(TARGETS tutti_static EXPORT TuttiTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(FILES ${CMAKE_SOURCE_DIR}/include/nccl.h ${CMAKE_SOURCE_DIR}/include/tutti.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(TARGETS tutti-run tutti-perf tutti-info tutti-tune
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
install(FILES ${CMAKE_SOURCE_DIR}/docs/man/tutti-run.1 ${CMAKE_SOURCE_DIR}/docs/man/tutti-perf.1
              ${CMAKE_SOURCE_DIR}/docs/man/tutti-info.1 ${CMAKE_SOURCE_DIR}/docs/man/tutti-tune.1
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tools)
file(GLOB TUTTI_DOC_FILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${TUTTI_DOC_FILES}
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT tools)

# find_package(Tutti): the exported targets, a config file that finds Threads first (the
# targets' link interface names Threads::Threads), and a version file; minor versions of 0.x
# are not promised compatible, so only the same 0.MINOR matches.
install(EXPORT TuttiTargets NAMESPACE Tutti:: DESTINATION ${TUTTI_CMAKE_INSTALL_DIR}
        FILE TuttiTargets.cmake COMPONENT dev)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/TuttiConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/cmake/TuttiConfig.cmake
                              INSTALL_DESTINATION ${TUTTI_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/TuttiConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/TuttiConfig.cmake
              ${CMAKE_BINARY_DIR}/cmake/TuttiConfigVersion.cmake
        DESTINATION ${TUTTI_CMAKE_INSTALL_DIR} COMPONENT dev)

# tutti.pc. Its prefix must be the one the tree is installed under, which `cmake --install
# --prefix DIR` and CPack (prefix /usr) choose only at install time; so configure_file fills in
# the version and directories now, and the install step fills in the prefix it is given
# (DESTDIR excluded) and writes the file straight into the destination.
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(TUTTI_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(TUTTI_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(TUTTI_PC_PREFIX "@TUTTI_PC_PREFIX@") # kept for the install step
configure_file(${CMAKE_SOURCE_DIR}/cmake/tutti.pc.in ${CMAKE_BINARY_DIR}/cmake/tutti.pc.in @ONLY)
install(CODE "
  set(TUTTI_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(pc_dir \"${CMAKE_INSTALL_LIBDIR}/pkgconfig\")
  if(NOT IS_ABSOLUTE \"\${pc_dir}\")
    set(pc_dir \"\${CMAKE_INSTALL_PREFIX}/\${pc_dir}\")
  endif()
  set(pc_file \"\$ENV{DESTDIR}\${pc_dir}/tutti.pc\")
  message(STATUS \"Installing: \${pc_file}\")
  configure_file(\"${CMAKE_BINARY_DIR}/cmake/tutti.pc.in\" \"\${pc_file}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${pc_file}\")
" COMPONENT dev)
