// tests/third_party/aiter_kut/fake_aiter.h - what the fake aiter entry points and the fake HIP
// runtime (fake_aiter.cpp) recorded, for aiter_kut_mapping_test.cpp: the adapter
// kernels/kut/aiter_kut.cpp compiled for the host and linked against fakes, so its argument
// mapping runs without aiter's modules or an AMD GPU (docs/kut-aiter.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "aiter_tensor.h"

namespace fake_aiter {

// One recorded argument that may be null.
struct Arg {
  bool present = false;
  aiter_tensor_t t{};
};

struct Decode {
  int calls = 0;
  Arg q, kv, qo_indptr, kv_indptr, kv_page_indices, kv_last_page_lens, num_kv_splits_indptr,
      work_meta_data, work_indptr, work_info_set, split_data, split_lse, output, lse, q_scale,
      kv_scale, g_kv_indptr, valid_split_count;
  int max_seqlen_q = -1, page_size = -1, nhead_kv = -1, cp_world_size = -1, cp_rank = -1,
      use_valid_split_count_reduce = -1, causal = -1;
  float softmax_scale = 0;
  void* stream = nullptr;
};

struct Reduce {
  int calls = 0;
  Arg partial_output, partial_lse, reduce_indptr, reduce_final_map, reduce_partial_map,
      final_output, final_lse;
  int max_seqlen_q = -1, num_kv_splits = -1;
  void* current_stream = nullptr;  // aiter::setCurrentHIPStream's last argument
};

struct State {
  Decode decode;
  Reduce reduce;
  std::string arch = "gfx950";    // hipGetDeviceProperties' gcnArchName
  bool set_device_fails = false;  // hipSetDevice returns an error
  bool launch_error = false;      // hipGetLastError returns an error after the call
  std::string aiter_throws;       // non-empty: the aiter entry points throw this
  int device_syncs = 0;
  int mallocs = 0;
};

State& state();
void Reset();

}  // namespace fake_aiter
