# Run by CPack (CPACK_PRE_BUILD_SCRIPTS, pgo/packaging/trees.py cpack()) for a build made with LTO,
# after it installed the files it packs and before it packs them.
#
# An LTO build's static libraries (libmariadbclient.a, libmysqlservices.a, ...) hold fat
# objects: machine code and GCC's LTO bytecode (-ffat-lto-objects). The bytecode is readable by
# this very GCC version only: another GCC linking with -flto fails on it ("bytecode stream
# ... generated with LTO version"), and rpmlint refuses it (E: lto-bytecode). The machine
# code is what a user links, so the packages keep it and drop the bytecode, as Fedora's
# brp-strip-lto does: the LTO sections and the marker symbol that makes a linker call the LTO
# plugin. Shared libraries and programs have no LTO sections; only archives are touched.
find_program(STRIP_PROGRAM strip REQUIRED)
file(GLOB_RECURSE archives LIST_DIRECTORIES false "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*.a")
foreach(archive IN LISTS archives)
  if(IS_SYMLINK "${archive}")
    continue()
  endif()
  execute_process(COMMAND "${STRIP_PROGRAM}" -p -R ".gnu.lto_*" -R ".gnu.debuglto_*" -N __gnu_lto_v1 "${archive}"
                  RESULT_VARIABLE result ERROR_VARIABLE error)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "cannot strip the LTO bytecode from ${archive}: ${error}")
  endif()
  message(STATUS "LTO bytecode stripped from ${archive}")
endforeach()
