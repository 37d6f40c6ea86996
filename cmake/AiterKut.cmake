# cmake/AiterKut.cmake - aiter's real persistent MLA decode as a kernel under test
# (kernels/kut/aiter_kut.cpp, docs/kut-aiter.md). Included by CMakeLists.txt at its end.
#
# MLASIM_AITER_DIR (shared with cmake/AiterPlannerBench.cmake) points at aiter's sources: a full
# checkout, or ../shared/third_party/aiter-mla.tar.xz extracted (`make verify` extracts it into
# build/third_party/aiter). With it:
#   kut_aiter_signature (+ 2 mutants)  ctest: the adapter's declaration of aiter's C entry point
#                                      mla_decode_stage1_asm_fwd matches asm_mla.cu, type by type
#   kut_aiter.AiterKut.* (ctest)       the adapter's argument mapping, run on the host against
#                                      fakes of aiter's entry points and the HIP runtime
#   amd_aiter_kut_check                with AMD_DEVICE_CHECK: clang-15 compiles the adapter's
#                                      translation unit (host and device) for AMD_CHECK_ARCHS
#                                      against aiter's headers, warnings as errors; headers the
#                                      archive lacks come from tests/kut/aiter_shim/
#   libmlasim_kut_aiter.so             GPU_BACKEND=HIP only, and only with a full checkout (the
#                                      real aiter_tensor.h, aiter_stream.h) and
#                                      MLASIM_AITER_JIT_DIR = aiter's built modules
#                                      (module_mla_asm.so, module_mla_reduce.so), linked with an
#                                      rpath to that folder
set(MLASIM_AITER_DIR "" CACHE PATH "aiter checkout (optional; cmake/AiterPlannerBench.cmake)")
set(MLASIM_AITER_JIT_DIR "" CACHE PATH
    "aiter's built JIT modules (module_mla_asm.so, module_mla_reduce.so) for libmlasim_kut_aiter.so")
if(NOT MLASIM_AITER_DIR)
  return()
endif()

set(_kut_aiter_src ${PROJECT_SOURCE_DIR}/kernels/kut/aiter_kut.cpp)
set(_kut_aiter_inc ${MLASIM_AITER_DIR}/csrc/include)
set(_kut_aiter_asm ${MLASIM_AITER_DIR}/csrc/py_itfs_cu/asm_mla.cu)
foreach(_f ${_kut_aiter_inc}/mla.h ${_kut_aiter_inc}/mla_reduce.h ${_kut_aiter_inc}/aiter_enum.h
           ${_kut_aiter_asm})
  if(NOT EXISTS ${_f})
    message(FATAL_ERROR "MLASIM_AITER_DIR=${MLASIM_AITER_DIR}: ${_f} not found")
  endif()
endforeach()

# The C entry point's parameter list, and two mutants of the adapter's declaration that the
# check must reject (a parameter lost, a parameter of another type).
set(_sig_args -DFUNC=mla_decode_stage1_asm_fwd -DDEFINITION=${_kut_aiter_asm}
              -DDECLARATION=${_kut_aiter_src})
set(_sig_script ${PROJECT_SOURCE_DIR}/cmake/AiterKutSignature.cmake)
add_test(NAME kut_aiter_signature COMMAND ${CMAKE_COMMAND} ${_sig_args} -P ${_sig_script})
add_test(NAME kut_aiter_signature_mutant_dropped
         COMMAND ${CMAKE_COMMAND} ${_sig_args} -DDROP_PARAM=25 -P ${_sig_script})
add_test(NAME kut_aiter_signature_mutant_retyped
         COMMAND ${CMAKE_COMMAND} ${_sig_args} -DRETYPE_PARAM=13 -P ${_sig_script})
set_tests_properties(kut_aiter_signature_mutant_dropped kut_aiter_signature_mutant_retyped
                     PROPERTIES WILL_FAIL TRUE)

# The adapter's argument mapping on the host: compiled as plain C++ against aiter's headers (and
# the shim) and linked with fakes of aiter's entry points and of the HIP runtime calls it makes
# (tests/third_party/aiter_kut/). Not in HIP builds, where the source is HIP and links libamdhip64.
find_path(MLASIM_HIP_INCLUDE hip/hip_runtime_api.h PATHS /usr/include /opt/rocm/include)
if(TARGET GTest::gtest AND NOT GPU_BACKEND STREQUAL "HIP" AND MLASIM_HIP_INCLUDE)
  set(_fake ${PROJECT_SOURCE_DIR}/tests/third_party/aiter_kut)
  add_executable(kut_aiter_mapping_test ${_fake}/aiter_kut_mapping_test.cpp ${_fake}/fake_aiter.cpp
                                        ${_kut_aiter_src})
  target_compile_definitions(kut_aiter_mapping_test PRIVATE __HIP_PLATFORM_AMD__)
  target_include_directories(kut_aiter_mapping_test PRIVATE ${PROJECT_SOURCE_DIR} ${_fake})
  target_include_directories(kut_aiter_mapping_test SYSTEM PRIVATE ${_kut_aiter_inc}
                             ${PROJECT_SOURCE_DIR}/tests/kut/aiter_shim ${MLASIM_HIP_INCLUDE})
  target_compile_options(kut_aiter_mapping_test PRIVATE -Wall -Wextra -Werror)
  target_link_libraries(kut_aiter_mapping_test PRIVATE GTest::gtest GTest::gtest_main)
  include(GoogleTest)
  gtest_discover_tests(kut_aiter_mapping_test DISCOVERY_TIMEOUT 60 TEST_PREFIX kut_aiter.)
endif()

if(AMD_DEVICE_CHECK)
  list(TRANSFORM AMD_CHECK_ARCHS PREPEND "--offload-arch=" OUTPUT_VARIABLE _kut_aiter_archs)
  set(_out ${CMAKE_BINARY_DIR}/amd/kut_aiter_kut.o)
  add_custom_command(OUTPUT ${_out}
    COMMAND ${HIP_CLANG} -std=c++17 -O2 -Wall -Wextra -Werror -x hip ${_kut_aiter_archs}
            --rocm-path=/usr --rocm-device-lib-path=/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode
            -I${PROJECT_SOURCE_DIR} -isystem ${_kut_aiter_inc}
            -isystem ${PROJECT_SOURCE_DIR}/tests/kut/aiter_shim
            -MMD -MF ${_out}.d -c ${_kut_aiter_src} -o ${_out}
    DEPENDS ${_kut_aiter_src}
    DEPFILE ${_out}.d
    COMMENT "AMD compile check (${AMD_CHECK_ARCHS}): kernels/kut/aiter_kut.cpp against ${MLASIM_AITER_DIR}"
    VERBATIM)
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/amd)
  add_custom_target(amd_aiter_kut_check ALL DEPENDS ${_out})
endif()

if(NOT GPU_BACKEND STREQUAL "HIP")
  return()
endif()
foreach(_f ${_kut_aiter_inc}/aiter_tensor.h ${_kut_aiter_inc}/aiter_stream.h)
  if(NOT EXISTS ${_f})
    message(FATAL_ERROR "libmlasim_kut_aiter.so needs a full aiter checkout: ${_f} not found "
                        "(the pinned archive lacks it; it only serves the compile check)")
  endif()
endforeach()
foreach(_m module_mla_asm module_mla_reduce)
  if(NOT EXISTS ${MLASIM_AITER_JIT_DIR}/${_m}.so)
    message(FATAL_ERROR "libmlasim_kut_aiter.so: MLASIM_AITER_JIT_DIR=${MLASIM_AITER_JIT_DIR} has "
                        "no ${_m}.so (build aiter's modules first: docs/kut-aiter.md)")
  endif()
endforeach()
set_source_files_properties(${_kut_aiter_src} PROPERTIES LANGUAGE HIP)
mlasim_kut_library(mlasim_kut_aiter SOURCES ${_kut_aiter_src})
target_include_directories(mlasim_kut_aiter SYSTEM PRIVATE ${_kut_aiter_inc})
# Imported targets, so the modules are linked by path (their names lack the lib prefix -l needs).
foreach(_m module_mla_asm module_mla_reduce)
  add_library(mlasim_aiter_${_m} SHARED IMPORTED)
  set_target_properties(mlasim_aiter_${_m} PROPERTIES IMPORTED_LOCATION ${MLASIM_AITER_JIT_DIR}/${_m}.so)
  target_link_libraries(mlasim_kut_aiter PRIVATE mlasim_aiter_${_m})
endforeach()
set_target_properties(mlasim_kut_aiter PROPERTIES BUILD_RPATH ${MLASIM_AITER_JIT_DIR}
                                                  INSTALL_RPATH ${MLASIM_AITER_JIT_DIR})
install(TARGETS mlasim_kut_aiter LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
