# cmake/FlashInferKut.cmake - FlashInfer's fa3 MLA decode (MLAPlan + mla::BatchMLAPageAttentionHopper,
# sm_90a) as a kernel under test: kernels/kut/flashinfer_kut.cu -> <build>/bin/
# libmlasim_kut_flashinfer.so (docs/kernel-under-test.md "FlashInfer adapter"). Included by
# CMakeLists.txt when -DMLASIM_FLASHINFER_DIR names a checkout (flashinfer-ai/flashinfer fb28d72:
# extract ../shared/third_party/flashinfer.tar.xz into the git-ignored .third_party/) and
# GPU_BACKEND=CUDA. FlashInfer's code is compiled from that checkout; none of it is in this
# repository. Flags and include order: ../shared/third_party/README.md (its CCCL before nvcc's).
set(_fi ${MLASIM_FLASHINFER_DIR})
foreach(f IN ITEMS ${_fi}/include/flashinfer/attention/mla_hopper.cuh
                   ${_fi}/3rdparty/cccl/libcudacxx/include ${_fi}/3rdparty/cutlass/include)
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "MLASIM_FLASHINFER_DIR=${_fi}: ${f} is missing (a FlashInfer checkout with "
                        "3rdparty/cccl and 3rdparty/cutlass is needed for the fa3 adapter)")
  endif()
endforeach()
mlasim_kut_library(mlasim_kut_flashinfer SOURCES ${PROJECT_SOURCE_DIR}/kernels/kut/flashinfer_kut.cu)
set_target_properties(mlasim_kut_flashinfer PROPERTIES CUDA_ARCHITECTURES OFF)
target_include_directories(mlasim_kut_flashinfer BEFORE PRIVATE
                           ${_fi}/3rdparty/cccl/libcudacxx/include ${_fi}/3rdparty/cccl/cub
                           ${_fi}/3rdparty/cccl/thrust ${_fi}/include ${_fi}/3rdparty/cutlass/include
                           ${_fi}/3rdparty/cutlass/tools/util/include)
target_compile_options(mlasim_kut_flashinfer PRIVATE
    -O3 --use_fast_math -DFLASHINFER_ENABLE_BF16 -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
    --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a)
