// kernels/kut/gpu_config.h - the --kernel-config of mlasim's GPU kernels (kernels/kut/gpu_kut.hip):
// variant=asm|opus|hk (the zero-KV behaviour and the built-in contract it declares, default asm)
// and tiling=0..10 (DecodeOptions::tiling, default 0), parsed by kernels/kut/kut_config.h. Plain
// host C++, so that the CPU build tests what the GPU library runs (tests/kut/kut_config_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/gpu_api.h"  // ZeroKvVariant
#include "kernels/kut/kut_config.h"

namespace mlasim::gpu::kut {

struct GpuConfig {
  std::string variant = "asm";
  ZeroKvVariant zero_kv = ZeroKvVariant::kAsm;
  int tiling = 0;
};

// Parses `text` (kut_config::GpuKeys) into *c. False with `why` set (kut_config::Parse's reasons:
// an empty item, an item without '=', an unknown key, a key given twice, a word or integer the
// key does not take); *c is then unchanged.
inline bool ParseGpuConfig(const char* text, GpuConfig* c, std::string* why) {
  using namespace kut_config;
  static constexpr ZeroKvVariant kZeroKv[] = {ZeroKvVariant::kAsm, ZeroKvVariant::kOpus,
                                              ZeroKvVariant::kHk};  // GpuKeys' variant words
  std::vector<int64_t> v;
  if (!Parse(text, GpuKeys(), &v, why)) return false;
  c->variant = GpuKeys()[kGpuVariant].words[v[kGpuVariant]];
  c->zero_kv = kZeroKv[v[kGpuVariant]];
  c->tiling = static_cast<int>(v[kGpuTiling]);
  return true;
}

}  // namespace mlasim::gpu::kut
