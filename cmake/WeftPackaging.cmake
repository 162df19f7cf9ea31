# What `cmake --install build --prefix P` lays out, besides the libraries (src/api) and programs
# (weft_install_programs):
#   P/include/nccl.h, P/include/weft/*.h          the public headers, nothing internal
#   P/lib/cmake/Weft/                              find_package(Weft): Weft::nccl, Weft::weft
#   P/lib/pkgconfig/{weft,nccl}.pc                 pkg-config --cflags --libs nccl
# and what `cpack -G DEB` (run in the build folder) packs from the same rules.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

set(WEFT_CMAKE_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Weft)
install(EXPORT WeftTargets NAMESPACE Weft:: DESTINATION ${WEFT_CMAKE_PACKAGE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/WeftConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/WeftConfig.cmake
                              INSTALL_DESTINATION ${WEFT_CMAKE_PACKAGE_DIR})
# 0.x: a minor release may change the API, so only the same minor version satisfies a request.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/WeftConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/WeftConfig.cmake ${PROJECT_BINARY_DIR}/WeftConfigVersion.cmake
        DESTINATION ${WEFT_CMAKE_PACKAGE_DIR})

# The .pc files find the prefix from their own folder (${pcfiledir}), so a tree that is moved
# or unpacked elsewhere (dpkg -x) still gives correct flags.
if(IS_ABSOLUTE ${CMAKE_INSTALL_LIBDIR})
  set(WEFT_PC_PREFIX ${CMAKE_INSTALL_PREFIX})
  set(WEFT_PC_PREFIX_IS_ABSOLUTE ON)
else()
  file(RELATIVE_PATH WEFT_PC_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
  string(REGEX REPLACE "/$" "" WEFT_PC_PREFIX ${WEFT_PC_PREFIX})
endif()
foreach(pc weft nccl)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc
                 @ONLY)
  if(WEFT_PC_PREFIX_IS_ABSOLUTE)
    file(READ ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc pc_text)
    string(REPLACE "\${pcfiledir}/" "" pc_text "${pc_text}")
    file(WRITE ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc "${pc_text}")
  endif()
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

# cpack -G DEB: one package, weft, with everything installed above (/usr prefix). Its Depends
# come from dpkg-shlibdeps over the ELF files (hwloc, pugixml, z3, MPI...); its shlibs file and
# ldconfig trigger come from CPack.
set(CPACK_PACKAGE_NAME weft)
set(CPACK_PACKAGE_VENDOR "Weft")
set(CPACK_PACKAGE_CONTACT "Weft maintainers <weft@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Collective communication library with NCCL's API and ABI (libnccl.so.2)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
find_program(WEFT_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(WEFT_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  # Without dpkg-shlibdeps the libraries the build linked are named by hand.
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libhwloc15, libpugixml1v5, libstdc++6, libc6")
endif()
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# Both packages ship libnccl.so.2; the dynamic loader would pick one of them arbitrarily.
set(CPACK_DEBIAN_PACKAGE_CONFLICTS "libnccl2, libnccl-dev")
include(CPack)
