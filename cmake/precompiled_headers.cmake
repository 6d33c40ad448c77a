# Precompiled headers shared by groups of targets.
#
# moechat_pch_group(NAME HEADERS <h>... LIBRARIES <lib>... [DEFINITIONS <d>...])
#   makes an object library NAME that compiles the headers once, with the usage
#   requirements of LIBRARIES and the DEFINITIONS: the flags of every target of
#   the group.
# moechat_use_pch(TARGET NAME)
#   has TARGET reuse NAME's header. TARGET must link the same LIBRARIES and have
#   the same DEFINITIONS (GCC ignores a precompiled header built with other
#   flags; the build stays correct, only slower).
# Both do nothing with -DMOECHAT_PCH=OFF.
function(moechat_pch_group name)
  if(NOT MOECHAT_PCH)
    return()
  endif()
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "HEADERS;LIBRARIES;DEFINITIONS")
  add_library(${name} OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_stub.cpp)
  set_target_properties(${name} PROPERTIES AUTOMOC OFF)
  target_link_libraries(${name} PRIVATE ${arg_LIBRARIES})
  if(arg_DEFINITIONS)
    target_compile_definitions(${name} PRIVATE ${arg_DEFINITIONS})
  endif()
  target_precompile_headers(${name} PRIVATE ${arg_HEADERS})
endfunction()

function(moechat_use_pch target name)
  if(NOT MOECHAT_PCH)
    return()
  endif()
  target_precompile_headers(${target} REUSE_FROM ${name})
  # AUTOMOC's mocs_compilation.cpp is empty for a test that includes its own .moc,
  # yet loading the header into it took about 3 s a target.
  get_target_property(automoc ${target} AUTOMOC)
  if(automoc)
    set_source_files_properties(${CMAKE_CURRENT_BINARY_DIR}/${target}_autogen/mocs_compilation.cpp
      PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()

# moechat_stl_pch(TARGET)
#   gives a Qt-free library a header of its own with the standard headers most of
#   the engine's sources include (the libraries' objects compile 8-12% faster).
#   <filesystem> stays out: through <iomanip> it brings std::quoted, which
#   argument-dependent lookup would find beside the project's own quoted().
function(moechat_stl_pch target)
  if(MOECHAT_PCH)
    target_precompile_headers(${target} PRIVATE <string> <vector> <cstdint> <stdexcept> <algorithm> <cmath>
      <memory> <cstring> <cstdio> <span> <string_view> <functional> <optional> <mutex> <chrono>)
  endif()
endfunction()
