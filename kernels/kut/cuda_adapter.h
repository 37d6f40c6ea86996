// kernels/kut/cuda_adapter.h - what the CUDA adapters of third-party kernels
// (kernels/kut/flashmla_kut.cu, flashmla_sparse_kut.cu) share behind the kernel-under-test ABI
// of kernels/mlasim_kut.h: the last error, device buffers the adapter owns, index tensors copied
// to the host and back, the device check. Header-only; each adapter library has its own copy of
// the state (one worker process runs one call at a time).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "kernels/mlasim_kut.h"

namespace mlasim::kut_cuda {

// The text mlasim_kut_last_error returns.
inline std::string& LastError() {
  static thread_local std::string e;
  return e;
}

// Sets the last error; returns `code` (an MLASIM_KUT_* code).
inline int Fail(int code, std::string why) {
  LastError() = std::move(why);
  return code;
}

// A device buffer the adapter owns, grown on demand and kept for the next call.
struct Scratch {
  void* p = nullptr;
  size_t bytes = 0;
  bool Reserve(size_t want) {
    if (want <= bytes) return true;
    if (p != nullptr) cudaFree(p);
    p = nullptr;
    bytes = 0;
    if (cudaMalloc(&p, want) != cudaSuccess) return false;
    bytes = want;
    return true;
  }
};

inline bool Aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Int32 elements [first, first + n) of the device tensor `t` to the host. False, with the reason
// set (MLASIM_KUT_UNSUPPORTED: `t` holds fewer; MLASIM_KUT_ERROR: the copy failed), otherwise.
inline bool Download(const mlasim_kut_tensor& t, int64_t first, int64_t n, const char* name,
                     std::vector<int32_t>* out, int* code) {
  out->assign(static_cast<size_t>(std::max<int64_t>(n, 0)), 0);
  if (n <= 0) return true;
  if (t.data == nullptr || first < 0 || (first + n) * 4 > static_cast<int64_t>(t.bytes)) {
    *code = Fail(MLASIM_KUT_UNSUPPORTED, std::string(name) + " holds fewer than the " +
                                             std::to_string(first + n) +
                                             " elements the call's indptrs name");
    return false;
  }
  const auto* src = static_cast<const unsigned char*>(t.data) + first * 4;
  if (cudaMemcpy(out->data(), src, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost) !=
      cudaSuccess) {
    *code = Fail(MLASIM_KUT_ERROR, std::string("copying ") + name + " to the host failed");
    return false;
  }
  return true;
}

// Copies `v` into `s` (grown to hold it) on `stream`. Returns an MLASIM_KUT_* code.
inline int Upload(Scratch& s, const std::vector<int32_t>& v, cudaStream_t stream) {
  if (!s.Reserve(std::max<size_t>(v.size(), 1) * 4))
    return Fail(MLASIM_KUT_ERROR, "cudaMalloc of an adapter buffer failed");
  if (cudaMemcpyAsync(s.p, v.data(), v.size() * 4, cudaMemcpyHostToDevice, stream) != cudaSuccess)
    return Fail(MLASIM_KUT_ERROR, "copying an adapter buffer to the device failed");
  return MLASIM_KUT_OK;
}

// "" when `device` is compute capability 9.0 (the sm_90a code FlashMLA builds), else the reason.
inline std::string NotSm90(int device, const char* what) {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (major == 9 && minor == 0) return "";
  return "a device of compute capability " + std::to_string(major) + "." + std::to_string(minor) +
         " (" + what + " is sm_90a)";
}

// The ABI checks every adapter makes first: the struct, the operation (a reduce is a no-op: the
// adapters combine inside the decode call), the device. Returns MLASIM_KUT_OK when the decode
// should run, *done = true when the call is complete already (a reduce).
inline int EnterDecode(const mlasim_kut_call* call, bool* done) {
  *done = false;
  if (call == nullptr || call->abi_version != MLASIM_KUT_ABI_VERSION ||
      call->struct_bytes != sizeof(mlasim_kut_call))
    return Fail(MLASIM_KUT_ERROR, "a call of another ABI version or struct size");
  if (call->op == MLASIM_KUT_OP_REDUCE) {
    *done = true;
    return MLASIM_KUT_OK;
  }
  if (call->op != MLASIM_KUT_OP_DECODE) return Fail(MLASIM_KUT_UNSUPPORTED, "unknown operation");
  if (cudaSetDevice(call->device) != cudaSuccess)
    return Fail(MLASIM_KUT_ERROR, "cudaSetDevice(" + std::to_string(call->device) + ") failed");
  return MLASIM_KUT_OK;
}

// Runs `f` (returning an MLASIM_KUT_* code); an exception the third-party host code throws (its
// launch checks throw on a failed assertion or a sticky CUDA error) becomes MLASIM_KUT_ERROR
// with its text instead of unwinding through the C ABI.
template <typename F>
int CatchAll(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Fail(MLASIM_KUT_ERROR, std::string("the kernel's host code threw: ") + e.what());
  } catch (...) {
    return Fail(MLASIM_KUT_ERROR, "the kernel's host code threw a non-standard exception");
  }
}

}  // namespace mlasim::kut_cuda

// The four entry points of kernels/mlasim_kut.h, forwarded to NS::Describe and NS::Run.
#define MLASIM_KUT_CUDA_ADAPTER_EXPORTS(NS)                                                   \
  extern "C" __attribute__((visibility("default"))) uint32_t mlasim_kut_abi_version(void) {   \
    return MLASIM_KUT_ABI_VERSION;                                                            \
  }                                                                                           \
  extern "C" __attribute__((visibility("default"))) int mlasim_kut_describe(                  \
      const char* config, mlasim_kut_info* info) {                                            \
    return NS::Describe(config, info);                                                        \
  }                                                                                           \
  extern "C" __attribute__((visibility("default"))) int mlasim_kut_run(                       \
      const mlasim_kut_call* call) {                                                          \
    return mlasim::kut_cuda::CatchAll([&] { return NS::Run(call); });                         \
  }                                                                                           \
  extern "C" __attribute__((visibility("default"))) const char* mlasim_kut_last_error(void) { \
    return mlasim::kut_cuda::LastError().c_str();                                             \
  }
