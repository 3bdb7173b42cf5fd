# What `cmake --install build --prefix P` puts under P, with paths relative to P
# so the tree can be moved:
#   bin/dprun
#   lib/libhvd.so.<version>, libhvd.so.<abi> (the SONAME), libhvd.so
#   include/hvd.h
#   lib/cmake/hvd/     the CMake package: find_package(hvd) gives hvd::hvd
#   lib/pkgconfig/hvd.pc
# and `cpack -G DEB` (in the build tree) makes dprun_<version>_<arch>.deb of the same
# files under /usr, its Depends worked out by dpkg-shlibdeps.
include(CMakePackageConfigHelpers)

install(TARGETS hvd EXPORT hvdTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS dprun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(HVD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/hvd)
install(EXPORT hvdTargets NAMESPACE hvd:: DESTINATION ${HVD_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/hvdConfig.cmake.in
  ${CMAKE_BINARY_DIR}/hvdConfig.cmake INSTALL_DESTINATION ${HVD_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_BINDIR)
# A later minor version serves callers of an earlier one; a new major does not.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/hvdConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/hvdConfig.cmake ${CMAKE_BINARY_DIR}/hvdConfigVersion.cmake
  DESTINATION ${HVD_CMAKE_DIR})

# hvd.pc finds the prefix from its own place, so the tree can move.
file(RELATIVE_PATH HVD_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" HVD_PC_TO_PREFIX "${HVD_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/hvd.pc.in ${CMAKE_BINARY_DIR}/hvd.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/hvd.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(CPACK_PACKAGE_NAME dprun)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "dprun")
set(CPACK_PACKAGE_CONTACT "dprun maintainers <dprun@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Horovod-style collective communication runtime: libhvd, hvd.h and the dprun launcher")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.invalid/dprun")
set(CPACK_PACKAGE_FILE_NAME_SUFFIX "")
include(CPack)
