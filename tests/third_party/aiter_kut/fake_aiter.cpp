// tests/third_party/aiter_kut/fake_aiter.cpp - fakes for aiter_kut_mapping_test: aiter's two
// entry points (recording every argument) and the few HIP runtime functions the adapter calls
// (host memory stands in for device memory). Written for mlasim; nothing here is aiter's.
#include "fake_aiter.h"

#include <hip/hip_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "aiter_stream.h"
#include "mla_reduce.h"

namespace fake_aiter {

State& state() {
  static State s;
  return s;
}

void Reset() {
  state() = State{};
}

namespace {
Arg Record(const aiter_tensor_t* t) {
  return t ? Arg{true, *t} : Arg{};
}
Arg Record(const std::optional<aiter_tensor_t>& t) {
  return t ? Arg{true, *t} : Arg{};
}
void MaybeThrow() {
  if (!state().aiter_throws.empty()) throw std::runtime_error(state().aiter_throws);
}
}  // namespace

}  // namespace fake_aiter

using fake_aiter::Record;
using fake_aiter::state;

extern "C" void mla_decode_stage1_asm_fwd(
    aiter_tensor_t* q, aiter_tensor_t* kv, aiter_tensor_t* qo_indptr, aiter_tensor_t* kv_indptr,
    aiter_tensor_t* kv_page_indices, aiter_tensor_t* kv_last_page_lens,
    aiter_tensor_t* num_kv_splits_indptr, aiter_tensor_t* work_meta_data,
    aiter_tensor_t* work_indptr, aiter_tensor_t* work_info_set, int max_seqlen_q, int page_size,
    int nhead_kv, float softmax_scale, aiter_tensor_t* split_data, aiter_tensor_t* split_lse,
    aiter_tensor_t* output, aiter_tensor_t* lse, aiter_tensor_t* q_scale, aiter_tensor_t* kv_scale,
    aiter_tensor_t* g_kv_indptr, int cp_world_size, int cp_rank, aiter_tensor_t* valid_split_count,
    int use_valid_split_count_reduce, int causal, hipStream_t stream) {
  fake_aiter::MaybeThrow();
  fake_aiter::Decode& d = state().decode;
  ++d.calls;
  d.q = Record(q), d.kv = Record(kv), d.qo_indptr = Record(qo_indptr);
  d.kv_indptr = Record(kv_indptr), d.kv_page_indices = Record(kv_page_indices);
  d.kv_last_page_lens = Record(kv_last_page_lens);
  d.num_kv_splits_indptr = Record(num_kv_splits_indptr);
  d.work_meta_data = Record(work_meta_data), d.work_indptr = Record(work_indptr);
  d.work_info_set = Record(work_info_set), d.split_data = Record(split_data);
  d.split_lse = Record(split_lse), d.output = Record(output), d.lse = Record(lse);
  d.q_scale = Record(q_scale), d.kv_scale = Record(kv_scale);
  d.g_kv_indptr = Record(g_kv_indptr), d.valid_split_count = Record(valid_split_count);
  d.max_seqlen_q = max_seqlen_q, d.page_size = page_size, d.nhead_kv = nhead_kv;
  d.softmax_scale = softmax_scale, d.cp_world_size = cp_world_size, d.cp_rank = cp_rank;
  d.use_valid_split_count_reduce = use_valid_split_count_reduce, d.causal = causal;
  d.stream = stream;
}

void mla_reduce_v1(const aiter_tensor_t& partial_output, const aiter_tensor_t& partial_lse,
                   const aiter_tensor_t& reduce_indptr,
                   std::optional<aiter_tensor_t> reduce_final_map,
                   const aiter_tensor_t& reduce_partial_map, const int32_t max_seqlen_q,
                   const int32_t num_kv_splits, aiter_tensor_t& final_output,
                   std::optional<aiter_tensor_t> final_lse) {
  fake_aiter::MaybeThrow();
  fake_aiter::Reduce& r = state().reduce;
  ++r.calls;
  r.partial_output = Record(&partial_output), r.partial_lse = Record(&partial_lse);
  r.reduce_indptr = Record(&reduce_indptr), r.reduce_final_map = Record(reduce_final_map);
  r.reduce_partial_map = Record(&reduce_partial_map), r.final_output = Record(&final_output);
  r.final_lse = Record(final_lse);
  r.max_seqlen_q = max_seqlen_q, r.num_kv_splits = num_kv_splits;
}

namespace aiter {
void setCurrentHIPStream(hipStream_t stream) {
  state().reduce.current_stream = static_cast<void*>(stream);
}
}  // namespace aiter

// The HIP runtime, as far as the adapter uses it.
hipError_t hipSetDevice(int) {
  return state().set_device_fails ? hipErrorInvalidDevice : hipSuccess;
}
hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int) {
  std::memset(prop, 0, sizeof(*prop));
  std::strncpy(prop->gcnArchName, state().arch.c_str(), sizeof(prop->gcnArchName) - 1);
  return hipSuccess;
}
hipError_t hipMalloc(void** ptr, size_t size) {
  ++state().mallocs;
  *ptr = std::calloc(1, size);
  return *ptr ? hipSuccess : hipErrorOutOfMemory;
}
hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, hipMemcpyKind, hipStream_t) {
  std::memcpy(dst, src, bytes);
  return hipSuccess;
}
hipError_t hipStreamSynchronize(hipStream_t) {
  return hipSuccess;
}
hipError_t hipDeviceSynchronize() {
  ++state().device_syncs;
  return hipSuccess;
}
hipError_t hipGetLastError() {
  return state().launch_error ? hipErrorLaunchFailure : hipSuccess;
}
const char* hipGetErrorString(hipError_t e) {
  return e == hipSuccess ? "no error" : "fake HIP error";
}
