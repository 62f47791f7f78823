# Installs the CPU-time man page. include() it from the top-level
# CMakeLists.txt after include(GNUInstallDirs).
install(FILES ${CMAKE_CURRENT_LIST_DIR}/../../doc/man/th_times.3
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man3)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/th_clock.3 ".so man3/th_times.3\n")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/th_clock.3 DESTINATION ${CMAKE_INSTALL_MANDIR}/man3)
