# cmake/FlashMla.cmake - the FlashMLA side-by-side benchmark (tests/gpu/flashmla_bench.cu) and
# FlashMLA's dense decode as a kernel under test (kernels/kut/flashmla_kut.cu ->
# <build>/bin/libmlasim_kut_flashmla.so, docs/kernel-under-test.md "FlashMLA adapter"), built
# when -DMLASIM_FLASHMLA_DIR points at a FlashMLA checkout with its CUTLASS submodule
# (deepseek-ai/FlashMLA 9241ae3: extract ../shared/third_party/flashmla.tar.xz into the
# git-ignored .third_party/). FlashMLA's scheduler, combine and dense bf16 decode are compiled
# from that checkout with FlashMLA's own nvcc flags (its setup.py) for sm_90a; nothing of
# FlashMLA is in this repository. GPU_BACKEND=CUDA only.
if(NOT GPU_BACKEND STREQUAL "CUDA")
  message(FATAL_ERROR "MLASIM_FLASHMLA_DIR needs GPU_BACKEND=CUDA (FlashMLA is CUDA / sm_90a)")
endif()
set(_fm ${MLASIM_FLASHMLA_DIR})
set(_fm_sources
  ${_fm}/csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu
  ${_fm}/csrc/smxx/decode/combine/combine.cu
  ${_fm}/csrc/sm90/decode/dense/instantiations/bf16.cu
  ${_fm}/csrc/sm90/decode/sparse_fp8/instantiations/v32_persistent_h64.cu
  ${_fm}/csrc/sm90/decode/sparse_fp8/instantiations/v32_persistent_h128.cu)
foreach(f IN LISTS _fm_sources ITEMS ${_fm}/csrc/params.h ${_fm}/csrc/cutlass/include/cutlass/cutlass.h)
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "MLASIM_FLASHMLA_DIR=${_fm}: ${f} is missing (a FlashMLA checkout with "
                        "csrc/cutlass is needed)")
  endif()
endforeach()
# FlashMLA's setup.py nvcc flags (sm_90 part). FlashMLA's sources are C++20: CMake 3.25 knows no
# CUDA20 dialect for nvcc, so -std=c++20 is a source option of FlashMLA's files. The bench itself
# is C++17 like the project.
set(MLASIM_FLASHMLA_FLAGS -O3 -DNDEBUG -D_USE_MATH_DEFINES -Wno-deprecated-declarations
    -U__CUDA_NO_HALF_OPERATORS__ -U__CUDA_NO_HALF_CONVERSIONS__ -U__CUDA_NO_HALF2_OPERATORS__
    -U__CUDA_NO_BFLOAT16_CONVERSIONS__ --expt-relaxed-constexpr --expt-extended-lambda
    --use_fast_math --ptxas-options=-v,--register-usage-level=10,--warn-on-spills -lineinfo
    -gencode=arch=compute_90a,code=sm_90a)
add_library(flashmla_sm90 STATIC ${_fm_sources})
# after the project's -std=c++17 on the command line, so it is the one nvcc uses
set_source_files_properties(${_fm_sources} PROPERTIES COMPILE_OPTIONS -std=c++20)
# position-independent: the kernel-under-test library links it into a shared object
set_target_properties(flashmla_sm90 PROPERTIES CUDA_ARCHITECTURES OFF POSITION_INDEPENDENT_CODE ON)
target_compile_options(flashmla_sm90 PRIVATE ${MLASIM_FLASHMLA_FLAGS})
target_include_directories(flashmla_sm90 PUBLIC ${_fm}/csrc ${_fm}/csrc/kerutils/include
                           ${_fm}/csrc/sm90 ${_fm}/csrc/cutlass/include
                           ${_fm}/csrc/cutlass/tools/util/include)

add_executable(mlasim_flashmla_bench ${PROJECT_SOURCE_DIR}/tests/gpu/flashmla_bench.cu)
set_target_properties(mlasim_flashmla_bench PROPERTIES CUDA_ARCHITECTURES OFF)
target_compile_options(mlasim_flashmla_bench PRIVATE ${MLASIM_FLASHMLA_FLAGS})
target_include_directories(mlasim_flashmla_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(mlasim_flashmla_bench PRIVATE flashmla_sm90 mlasim_gpu mlasim_ref)

# FlashMLA's scheduler + dense decode + combine behind the kernel-under-test ABI
# (mlasim_kut_library: cmake/KernelUnderTest.cmake). Host code only; FlashMLA's device code comes
# from flashmla_sm90.
mlasim_kut_library(mlasim_kut_flashmla SOURCES ${PROJECT_SOURCE_DIR}/kernels/kut/flashmla_kut.cu)
set_target_properties(mlasim_kut_flashmla PROPERTIES CUDA_ARCHITECTURES OFF)
target_compile_options(mlasim_kut_flashmla PRIVATE ${MLASIM_FLASHMLA_FLAGS})
target_link_libraries(mlasim_kut_flashmla PRIVATE flashmla_sm90)
# FlashMLA's sparse fp8 decode (DeepSeek V3.2 layout, 64 / 128 heads) + scheduler + combine behind
# the same ABI (kernels/kut/flashmla_sparse_kut.cu -> libmlasim_kut_flashmla_sparse.so,
# docs/kernel-under-test.md "FlashMLA sparse adapter").
mlasim_kut_library(mlasim_kut_flashmla_sparse SOURCES
                   ${PROJECT_SOURCE_DIR}/kernels/kut/flashmla_sparse_kut.cu)
set_target_properties(mlasim_kut_flashmla_sparse PROPERTIES CUDA_ARCHITECTURES OFF)
target_compile_options(mlasim_kut_flashmla_sparse PRIVATE ${MLASIM_FLASHMLA_FLAGS})
target_link_libraries(mlasim_kut_flashmla_sparse PRIVATE flashmla_sm90)
