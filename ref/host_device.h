// ref/host_device.h - MLASIM_HOST_DEVICE: marks the plain functions that both sides of a .hip /
// CUDA file call (the input-value generator, the kernels' fragment maps, gpu_api.h's helpers);
// `__host__ __device__` under nvcc or HIP, nothing in a C++ build.
#pragma once

#if !defined(MLASIM_HOST_DEVICE)
#if defined(__CUDACC__) || defined(__HIP__)
#define MLASIM_HOST_DEVICE __host__ __device__
#else
#define MLASIM_HOST_DEVICE
#endif
#endif
