# Optional benchmark: aiter's own v1.2 MLA metadata planner compiled as host C++ and timed against
# ref::PlanMlaMetadata in one process (issue 15, goal 1; docs/performance.md).
#
#   cmake --preset default -DMLASIM_AITER_DIR=$PWD/.third_party/aiter
#   cmake --build build --target mlasim_aiter_bench
#
# MLASIM_AITER_DIR points at an aiter checkout (or ../shared/third_party/aiter-mla.tar.xz extracted
# into the git-ignored .third_party/). The five headers the planner needs are copied into the build
# tree at build time (cmake/AiterRewrite.cmake), its four kernel launches rewritten into plain
# calls; tests/bench/aiter/shim/ supplies the HIP and aiter names they use, run as one lane.
# Nothing of aiter enters the source tree.
set(MLASIM_AITER_DIR "" CACHE PATH "aiter checkout for the planner-vs-aiter benchmark (optional)")
if(NOT MLASIM_AITER_DIR)
  return()
endif()

set(_aiter_meta ${MLASIM_AITER_DIR}/csrc/kernels/mla/metadata)
set(_aiter_inc ${MLASIM_AITER_DIR}/csrc/include)
# header -> launches it must hold
set(_aiter_headers
    ${_aiter_meta}/v1_2_device.cuh 4
    ${_aiter_meta}/v1_comm.cuh 0
    ${_aiter_inc}/mla.h 0
    ${_aiter_inc}/mla_metadata.h 0
    ${_aiter_inc}/aiter_enum.h 0)
set(_aiter_gen ${CMAKE_BINARY_DIR}/aiter_planner)
set(_aiter_outs "")
list(LENGTH _aiter_headers _n)
math(EXPR _last "${_n} - 1")
foreach(_i RANGE 0 ${_last} 2)
  math(EXPR _j "${_i} + 1")
  list(GET _aiter_headers ${_i} _src)
  list(GET _aiter_headers ${_j} _launches)
  if(NOT EXISTS ${_src})
    message(FATAL_ERROR "MLASIM_AITER_DIR=${MLASIM_AITER_DIR}: ${_src} not found (extract "
                        "../shared/third_party/aiter-mla.tar.xz into .third_party/)")
  endif()
  get_filename_component(_name ${_src} NAME)
  add_custom_command(OUTPUT ${_aiter_gen}/${_name}
    COMMAND ${CMAKE_COMMAND} -DIN=${_src} -DOUT=${_aiter_gen}/${_name} -DLAUNCHES=${_launches}
            -P ${PROJECT_SOURCE_DIR}/cmake/AiterRewrite.cmake
    DEPENDS ${_src} ${PROJECT_SOURCE_DIR}/cmake/AiterRewrite.cmake
    COMMENT "aiter planner: ${_name} -> build tree (launches as plain calls)"
    VERBATIM)
  list(APPEND _aiter_outs ${_aiter_gen}/${_name})
endforeach()
file(MAKE_DIRECTORY ${_aiter_gen})

# aiter's code in its own object library: the shim comes first on its include path and no project
# header is visible to it except the bench's plain interface (tests/bench/aiter/aiter_v12.h).
add_library(mlasim_aiter_v12 OBJECT ${PROJECT_SOURCE_DIR}/tests/bench/aiter/aiter_v12.cpp
                                    ${_aiter_outs})
target_include_directories(mlasim_aiter_v12 BEFORE PRIVATE
                           ${PROJECT_SOURCE_DIR}/tests/bench/aiter/shim ${_aiter_gen})
target_compile_options(mlasim_aiter_v12 PRIVATE -w)  # third-party code: its warnings are not ours

add_executable(mlasim_aiter_bench ${PROJECT_SOURCE_DIR}/tests/bench/aiter/planner_vs_aiter_bench.cpp
                                  $<TARGET_OBJECTS:mlasim_aiter_v12>)
mlasim_target(mlasim_aiter_bench)
mlasim_link_existing(mlasim_aiter_bench PRIVATE mlasim_ref)
target_link_libraries(mlasim_aiter_bench PRIVATE benchmark::benchmark)
