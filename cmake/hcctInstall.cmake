# What `cmake --install` adds beyond each component's targets (docs/INSTALL.md): the CMake package
# (hcctConfig.cmake, version file, exported targets, hcct_instrument()), hcct.pc, the CLI's help as
# man pages and text, the docs; and the Debian package (cpack -G DEB).
include(CMakePackageConfigHelpers)

install(EXPORT hcctTargets NAMESPACE hcct:: DESTINATION ${HCCT_INSTALL_CMAKEDIR})
if(TARGET hcct_analysis)
  install(EXPORT hcctAnalysisTargets NAMESPACE hcct:: DESTINATION ${HCCT_INSTALL_CMAKEDIR})
endif()
configure_package_config_file(cmake/hcctConfig.cmake.in "${PROJECT_BINARY_DIR}/cmake/hcctConfig.cmake"
  INSTALL_DESTINATION ${HCCT_INSTALL_CMAKEDIR}
  PATH_VARS HCCT_INSTALL_PLUGINDIR)
# 0.x: a minor release may change the API.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/cmake/hcctConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/cmake/hcctConfig.cmake" "${PROJECT_BINARY_DIR}/cmake/hcctConfigVersion.cmake"
              cmake/hcctInstrument.cmake
        DESTINATION ${HCCT_INSTALL_CMAKEDIR})

# hcct.pc, relocatable: its prefix is found from its own directory.
set(HCCT_PC_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
cmake_path(RELATIVE_PATH CMAKE_INSTALL_PREFIX BASE_DIRECTORY "${CMAKE_INSTALL_PREFIX}/${HCCT_PC_DIR}"
           OUTPUT_VARIABLE HCCT_PC_PREFIX_FROM_PCDIR)
set(HCCT_PC_LIBS_PRIVATE "${CMAKE_DL_LIBS}")
list(TRANSFORM HCCT_PC_LIBS_PRIVATE PREPEND "-l")
configure_file(cmake/hcct.pc.in "${PROJECT_BINARY_DIR}/hcct.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/hcct.pc" DESTINATION ${HCCT_PC_DIR})

# The CLI's --help of every subcommand (the subcommands main.cc registers), built with hcct:
# share/doc/hcct/help/*.txt, and man pages when help2man is installed.
if(TARGET hcct)
  file(STRINGS tools/hcct/main.cc registrars REGEX "add_[a-z]+_command,")
  set(hcct_subcommands "")
  foreach(line IN LISTS registrars)
    string(REGEX MATCH "add_([a-z]+)_command" _ "${line}")
    list(APPEND hcct_subcommands ${CMAKE_MATCH_1})
  endforeach()
  find_program(HCCT_HELP2MAN help2man)
  if(NOT HCCT_HELP2MAN)
    message(STATUS "help2man not found: hcct's --help is installed as text only, without man pages")
    set(HCCT_HELP2MAN "")
  endif()
  set(help_dir "${PROJECT_BINARY_DIR}/help")
  set(help_outputs "${help_dir}/hcct.txt")
  set(man_pages "")
  if(HCCT_HELP2MAN)
    list(APPEND man_pages "${help_dir}/hcct.1")
  endif()
  foreach(cmd IN LISTS hcct_subcommands)
    list(APPEND help_outputs "${help_dir}/hcct-${cmd}.txt")
    if(HCCT_HELP2MAN)
      list(APPEND man_pages "${help_dir}/hcct-${cmd}.1")
    endif()
  endforeach()
  list(JOIN hcct_subcommands "|" commands_arg)
  add_custom_command(OUTPUT ${help_outputs} ${man_pages}
    COMMAND ${CMAKE_COMMAND} -DHCCT=$<TARGET_FILE:hcct> -DOUT=${help_dir} -DVERSION=${PROJECT_VERSION}
            -DCOMMANDS=${commands_arg} -DHELP2MAN=${HCCT_HELP2MAN} -P ${PROJECT_SOURCE_DIR}/cmake/hcctHelpPages.cmake
    DEPENDS hcct cmake/hcctHelpPages.cmake
    COMMENT "hcct --help of every subcommand: text and man pages"
    VERBATIM)
  add_custom_target(hcct_help_pages ALL DEPENDS ${help_outputs} ${man_pages})
  install(FILES ${help_outputs} DESTINATION ${CMAKE_INSTALL_DOCDIR}/help)
  if(man_pages)
    install(FILES ${man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  endif()
endif()
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md" PATTERN "*.json")

# cpack -G DEB: one package "hcct" installing under /usr.
set(CPACK_PACKAGE_NAME hcct)
set(CPACK_PACKAGE_VENDOR "hcct")
set(CPACK_PACKAGE_CONTACT "hcct maintainers <hcct@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "calling-context profiler: runtime, CLI, GCC plugin, LLVM kpath plugin")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# Depends: the libraries the CLI and plugins load, found by dpkg-shlibdeps (libdw1, libelf1,
# libstdc++6, libc6, ...).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The compilers the plugins load into and the -dev packages hcct::analysis and hcct.pc users compile
# against are recommended: the runtime and the CLI work without them.
set(hcct_deb_recommends "pkg-config" "libdw-dev")
if(HCCT_PLUGIN_GCC_VERSION)
  string(REGEX MATCH "^[0-9]+" gcc_major "${HCCT_PLUGIN_GCC_VERSION}")
  list(APPEND hcct_deb_recommends "gcc-${gcc_major}")
endif()
if(TARGET hcct_kpath_plugin)
  list(APPEND hcct_deb_recommends "clang-${HCCT_LLVM_VERSION}")
endif()
list(JOIN hcct_deb_recommends ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
include(CPack)
