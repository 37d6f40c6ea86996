# cmake/KernelUnderTest.cmake - kernel-under-test libraries (kernels/mlasim_kut.h, docs/kernel-under-test.md),
# included by CMakeLists.txt after the GPU library:
#   libmlasim_kut_cpu.so          mlasim's CPU kernel (kernels/kut/cpu_kut.cpp): every build
#   libmlasim_kut_gpu.so          mlasim's HIP kernels (kernels/kut/gpu_kut.hip): CUDA / HIP builds;
#                                 run_mla_decode, `replay --gpu` and `fuzz --gpu` reach the decode
#                                 kernels only through it
#   libmlasim_kut_example_*.so    tests/kut/lib/: kernels with deliberate bugs, a kernel with
#                                 FlashMLA's limits (page64), and broken libraries
#   (libmlasim_kut_aiter.so       aiter's real kernels: cmake/AiterKut.cmake, docs/kut-aiter.md)
# All land in <build>/bin beside the mlasim binary, where mlasim looks for libmlasim_kut_gpu.so.
# The ABI header is installed with the CMake package (include/mlasim/kernels/mlasim_kut.h) and
# compiled as C99 by the kut_header_c99 test.
include(GNUInstallDirs)

function(mlasim_kut_library name)
  cmake_parse_arguments(K "" "" "SOURCES;DEFINES" ${ARGN})
  add_library(${name} SHARED ${K_SOURCES})
  set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin
                                           CXX_VISIBILITY_PRESET hidden
                                           CUDA_VISIBILITY_PRESET hidden
                                           HIP_VISIBILITY_PRESET hidden
                                           POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX,HIP>:-Wall -Wextra>)
  if(K_DEFINES)
    target_compile_definitions(${name} PRIVATE ${K_DEFINES})
  endif()
endfunction()

set(MLASIM_KUT_TARGETS "")
if(NOT MLASIM_LIBFUZZER)
  mlasim_kut_library(mlasim_kut_cpu SOURCES ${PROJECT_SOURCE_DIR}/kernels/kut/cpu_kut.cpp)
  list(APPEND MLASIM_KUT_TARGETS mlasim_kut_cpu)
  foreach(bug IN ITEMS tile64 q_overread minus_one page64)
    mlasim_kut_library(mlasim_kut_example_${bug}
                       SOURCES ${PROJECT_SOURCE_DIR}/tests/kut/lib/kut_${bug}.cpp)
    list(APPEND MLASIM_KUT_TARGETS mlasim_kut_example_${bug})
  endforeach()
  mlasim_kut_library(mlasim_kut_example_page64_tile64
                     SOURCES ${PROJECT_SOURCE_DIR}/tests/kut/lib/kut_page64.cpp
                     DEFINES MLASIM_KUT_PAGE64_TILE64=1)
  list(APPEND MLASIM_KUT_TARGETS mlasim_kut_example_page64_tile64)
  # 1 another ABI version, 2 no mlasim_kut_run, 3 crashes in run, 4 crashes in describe, 5 hangs,
  # 6 unknown memory kind, 7 no operation, 8 describe fails, 9 unknown contract, 10 info of
  # another ABI version, 11 every run fails, 12 its first run
  # fails, 13 page_size_multiple -1 (tests/kut/lib/kut_broken.cpp)
  foreach(n RANGE 1 13)
    mlasim_kut_library(mlasim_kut_example_broken${n} SOURCES ${PROJECT_SOURCE_DIR}/tests/kut/lib/kut_broken.cpp
                       DEFINES MLASIM_KUT_BROKEN=${n})
    list(APPEND MLASIM_KUT_TARGETS mlasim_kut_example_broken${n})
  endforeach()
  install(TARGETS mlasim_kut_cpu LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# mlasim's own HIP kernels as a kernel-under-test library (the decode kernels live only here).
if(GPU_KUT_HIP_SOURCES AND (GPU_BACKEND STREQUAL "CUDA" OR GPU_BACKEND STREQUAL "HIP"))
  if(GPU_BACKEND STREQUAL "CUDA")
    set_source_files_properties(${GPU_KUT_HIP_SOURCES} PROPERTIES LANGUAGE CUDA)
  endif()
  mlasim_kut_library(mlasim_kut_gpu SOURCES ${GPU_KUT_HIP_SOURCES})
  target_include_directories(mlasim_kut_gpu PRIVATE ${PROJECT_SOURCE_DIR}/kernels)
  # Hopper's warpgroup mma (the decode kernels of tilings 8 and 9, kernels/decode/sm90/wgmma.h,
  # and of tiling 10, kernels/decode/sm90/heads_m.h)
  # exists only for the arch-specific target sm_90a: when the CUDA build is for 90 (the default),
  # this library is compiled for compute_90a / sm_90a instead (it then runs on sm_90 devices
  # only, which is what a build for 90 targets) and says so with MLASIM_KUT_SM90A; other arch
  # lists keep their own and the library refuses tilings 8, 9 and 10.
  if(GPU_BACKEND STREQUAL "CUDA" AND "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "90")
    set_target_properties(mlasim_kut_gpu PROPERTIES CUDA_ARCHITECTURES OFF)
    target_compile_options(mlasim_kut_gpu PRIVATE
                           $<$<COMPILE_LANGUAGE:CUDA>:-gencode=arch=compute_90a,code=sm_90a -lineinfo>)
    target_compile_definitions(mlasim_kut_gpu PRIVATE MLASIM_KUT_SM90A=1)
    # After each build of the library: ptxas must not have serialized any kernel's wgmma
    # (cmake/WgmmaCheck.cmake; a static check of the compiler's report, not a timing).
    add_custom_command(TARGET mlasim_kut_gpu POST_BUILD
                       COMMAND ${CMAKE_COMMAND} -DNVCC=${CMAKE_CUDA_COMPILER}
                               -DSRC=${PROJECT_SOURCE_DIR}/kernels/kut/gpu_kut.hip
                               -DROOT=${PROJECT_SOURCE_DIR}
                               -DOUT=${CMAKE_BINARY_DIR}/wgmma_check.o
                               "-DFLAGS=${CMAKE_CUDA_FLAGS}"
                               "-DCCBIN=${CMAKE_CUDA_HOST_COMPILER}"
                               -P ${PROJECT_SOURCE_DIR}/cmake/WgmmaCheck.cmake
                       VERBATIM)
  endif()
  list(APPEND MLASIM_KUT_TARGETS mlasim_kut_gpu)
  install(TARGETS mlasim_kut_gpu LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
target_link_libraries(mlasim_gpu PUBLIC ${CMAKE_DL_LIBS})  # kernels/kut_client.cpp

install(FILES ${PROJECT_SOURCE_DIR}/kernels/mlasim_kut.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mlasim/kernels)

# The header is C99: a C compiler takes it alone with every warning an error.
find_program(MLASIM_C_COMPILER NAMES cc gcc clang)
if(MLASIM_C_COMPILER)
  add_test(NAME kut_header_c99
           COMMAND ${MLASIM_C_COMPILER} -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only
                   -x c ${PROJECT_SOURCE_DIR}/kernels/mlasim_kut.h)
endif()

# Called for the test binary: it finds the libraries and the mlasim binary (the workers' exe).
function(mlasim_kut_tests tgt)
  if(MLASIM_KUT_TARGETS)
    add_dependencies(${tgt} ${MLASIM_KUT_TARGETS})
  endif()
  target_compile_definitions(${tgt} PRIVATE MLASIM_KUT_DIR="${CMAKE_BINARY_DIR}/bin")
endfunction()
