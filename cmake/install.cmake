# Install rules, the exported CMake package and the Debian package.
#
#   cmake --install build [--prefix DIR]
#     bin/raftkv-server, bin/raftkvctl
#     include/raftkv/{client,common,proto,raftkv/v1}/...   the client library's headers
#     lib/libraftkv_{client,proto,version}.a
#     lib/cmake/raftkv/raftkvConfig.cmake                    find_package(raftkv) -> raftkv::client
#     share/doc/raftkv/LICENSE
#   and, in the .deb (component "service"): the systemd unit raftkv@.service
#   and a one-member configuration under /etc/raftkv (deploy/).
#
#   cd build && cpack -G DEB    ->  raftkv_<version>_<arch>.deb
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RAFTKV_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/raftkv)

# ---- programs ----
if(TARGET raftkv-server)
  install(TARGETS raftkv-server RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
endif()
install(TARGETS raftkvctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)

# ---- the client library: raftkv::client ----
set_target_properties(raftkv_client PROPERTIES EXPORT_NAME client)
set_target_properties(raftkv_proto PROPERTIES EXPORT_NAME proto)
set_target_properties(raftkv_version PROPERTIES EXPORT_NAME version)
set_target_properties(raftkv_common PROPERTIES EXPORT_NAME common)
install(TARGETS raftkv_client raftkv_common raftkv_proto raftkv_version
        EXPORT raftkvTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
# Headers keep their include paths ("client/kv_client.h", "raftkv/v1/kv.pb.h")
# under include/raftkv, which the targets add to their users' include path.
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/src/client/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/raftkv/client COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/src/common/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/raftkv/common COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/src/proto/api.h ${CMAKE_CURRENT_SOURCE_DIR}/src/proto/windows_macros.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/raftkv/proto COMPONENT dev)
foreach(name kv watch lease admin)
  install(FILES ${GEN_DIR}/raftkv/v1/${name}.pb.h ${GEN_DIR}/raftkv/v1/${name}.grpc.pb.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/raftkv/raftkv/v1 COMPONENT dev)
endforeach()
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/protos/raftkv/v1/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/raftkv/protos/raftkv/v1 COMPONENT dev FILES_MATCHING PATTERN "*.proto")

# `cmake --install --strip` (and cpack, with CPACK_STRIP_FILES) strips the
# programs; the archives lose their debug information only (their symbols
# are what a client links against).
if(CMAKE_STRIP AND NOT MSVC)
  if(APPLE)
    set(RAFTKV_STRIP_DEBUG_FLAG -S)
  else()
    set(RAFTKV_STRIP_DEBUG_FLAG --strip-debug)
  endif()
  foreach(lib raftkv_client raftkv_common raftkv_proto raftkv_version)
    install(CODE "
      if(CMAKE_INSTALL_DO_STRIP)
        execute_process(COMMAND \"${CMAKE_STRIP}\" ${RAFTKV_STRIP_DEBUG_FLAG}
          \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:${lib}>\"
          RESULT_VARIABLE rc)
        if(NOT rc EQUAL 0)
          message(FATAL_ERROR \"strip of $<TARGET_FILE_NAME:${lib}> failed\")
        endif()
      endif()" COMPONENT dev)
  endforeach()
endif()

install(EXPORT raftkvTargets NAMESPACE raftkv:: DESTINATION ${RAFTKV_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/raftkvConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/raftkvConfig.cmake
                              INSTALL_DESTINATION ${RAFTKV_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/raftkvConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/raftkvConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/raftkvConfigVersion.cmake
        DESTINATION ${RAFTKV_CMAKE_DIR} COMPONENT dev)
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT server)

# ---- a system service: the unit and a one-member configuration ----
# Component "service", left out of a plain `cmake --install` (its paths are
# the system's: /etc/raftkv, /lib/systemd/system, and the unit runs
# /usr/bin/raftkv-server): the .deb carries it; `cmake --install build
# --component service` installs it by hand.
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/deploy/systemd/raftkv@.service
        DESTINATION /lib/systemd/system COMPONENT service EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/deploy/etc/raftkv/node1.flags
              ${CMAKE_CURRENT_SOURCE_DIR}/deploy/etc/raftkv/cluster.conf
        DESTINATION /etc/raftkv COMPONENT service EXCLUDE_FROM_ALL)

# ---- the Debian package: cd build && cpack -G DEB ----
set(CPACK_PACKAGE_NAME raftkv)
set(CPACK_PACKAGE_VENDOR "raftkv")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Replicated key-value store on Raft with an etcd-style gRPC API")
set(CPACK_PACKAGE_CONTACT "raftkv maintainers <raftkv@localhost>")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_CURRENT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION database)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # the shared libraries' packages, from dpkg-shlibdeps
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
# Building a C++ client against the package (find_package(raftkv)) needs the
# dependencies' headers and CMake files too.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "cmake, libgrpc++-dev, libprotobuf-dev, protobuf-compiler-grpc, libgflags-dev, libgoogle-glog-dev")
# Programs and archives without their debug information (a RelWithDebInfo
# build would make a package of about 50 MB instead of a few).
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/postinst
    ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/prerm
    ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/postrm
    ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# One package with every component, the service's files included.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL server dev service)
include(CPack)
