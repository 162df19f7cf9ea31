# weft_install_programs(<targets...>): installs the programs to bin/. Their RUNPATH names the
# library folder relative to the program ($ORIGIN/../lib), so an installed tree finds its own
# libweft.so.0 and libnccl.so.2 wherever it is placed: a prefix, a staged DEB, an unpacked copy.
function(weft_install_programs)
  file(RELATIVE_PATH bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
  set_target_properties(${ARGN} PROPERTIES INSTALL_RPATH "$ORIGIN/${bin_to_lib}")
  install(TARGETS ${ARGN} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()
