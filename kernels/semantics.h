// File: kernels/semantics.h
//
// The GPU runner's knobs from a kernel contract's semantics (sim/contract.h): one description,
// read by the simulator's executor and by the GPU runner alike. Host code only.
#pragma once

#include "kernels/gpu_api.h"
#include "sim/contract.h"

namespace mlasim::gpu {

// What mlasim's decode kernel does with a zero-KV work item, per the contract.
inline ZeroKvVariant ZeroKvVariantOf(const sim::DecodeSemantics& s) {
  switch (s.zero_kv) {
    case sim::ZeroKv::kReadsQWritesOutput: return ZeroKvVariant::kAsm;
    case sim::ZeroKv::kSkips: return ZeroKvVariant::kOpus;
    case sim::ZeroKv::kReadsQOnly: return ZeroKvVariant::kHk;
  }
  return ZeroKvVariant::kAsm;
}

}  // namespace mlasim::gpu
