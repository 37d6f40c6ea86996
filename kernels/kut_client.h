// kut_client.h - run_mla_decode's way to mlasim's decode kernels: they live only in the
// kernel-under-test library libmlasim_kut_gpu.so (kernels/kut/gpu_kut.hip), loaded once with
// dlopen and called through the ABI of kernels/mlasim_kut.h like any kernel under test. Host C++.
#pragma once

#include <string>

#include "kernels/mlasim_kut.h"

namespace mlasim::gpu {

class KutClient {
 public:
  // The library, loaded on first use (gpu_api.h kut_library_path). Throws std::runtime_error
  // naming the path and the reason when it is missing or of another ABI version.
  static const KutClient& Get();
  // mlasim_kut_run: throws std::invalid_argument (MLASIM_KUT_UNSUPPORTED) or std::runtime_error
  // (MLASIM_KUT_ERROR) with the library's message.
  void Run(const mlasim_kut_call& call) const;
  // The decode kernel the library picks for a config, head count and head dims (its optional
  // export mlasim_kut_gpu_kernel_name_v2), "" without it.
  // kv_fp8, q_fp8: 1 for fp8 e4m3fn.
  std::string KernelName(const char* config, int heads, int head_dim_qk, int head_dim_v,
                         int kv_fp8, int q_fp8) const;

 private:
  using KernelNameFn = const char* (*)(const char*, int, int, int, int, int);
  mlasim_kut_run_fn run_ = nullptr;
  mlasim_kut_last_error_fn last_error_ = nullptr;
  KernelNameFn kernel_name_ = nullptr;
};

}  // namespace mlasim::gpu
