// File: fuzz/kut_library.h
//
// A kernel under test (kernels/mlasim_kut.h, docs/kernel-under-test.md): a shared library loaded with dlopen,
// checked (ABI version, required symbols, a description mlasim can use, contracts that parse)
// and called. Only worker processes (fuzz/kut_pool.h) load one, so a library that crashes or
// hangs ends a worker, never the campaign.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz/kernel_limits.h"
#include "kernels/mlasim_kut.h"
#include "ref/status.h"
#include "sim/contract.h"

namespace mlasim::fuzz {

// What a kernel library says it runs (mlasim_kut_info), with its contracts parsed.
struct KutDescription {
  std::string path;    // as given to --kernel-under-test
  std::string config;  // --kernel-config
  std::string name;
  uint32_t ops = 0;
  bool host_memory = true;
  uint32_t q_dtypes = 0, kv_dtypes = 0, o_dtypes = 0;
  int32_t heads_multiple = 1, max_heads = 0;
  int32_t head_dim_qk_multiple = 1, max_head_dim_qk = 0;
  int32_t head_dim_v_multiple = 1, max_head_dim_v = 0;
  int32_t max_page_size = 0;
  int32_t page_size_multiple = 1;  // mlasim_kut_info.page_size_multiple (0 there: 1 here)
  bool dense = false, sparse = false;
  std::shared_ptr<const sim::Contract> decode_contract, reduce_contract;

  // The limits the scenario generator keeps a campaign's cases within (fuzz/kernel_limits.h):
  // dense / sparse, the KV dtypes it takes natively (bf16, fp8 e4m3fn), the page size.
  KernelLimits Limits() const;

  // "" when the kernel runs a call of this shape, else why not (one sentence).
  std::string Unsupported(int32_t op, int32_t heads, int32_t head_dim_qk, int32_t head_dim_v,
                          int32_t page_size, bool sparse_call) const;
  // The description as JSON (the contracts as their resolved documents) and back: what a worker
  // sends its parent. FromJson errors: InvalidArgument("--kernel-under-test", "malformed kernel
  // description: $.KEY: why") for a missing, mistyped or out-of-range field (a uint32 mask above
  // 2^32 - 1, an int32 limit past int32, memory other than "host" or "device"), and a contract
  // that does not parse.
  nlohmann::json ToJson() const;
  static StatusOr<KutDescription> FromJson(const nlohmann::json& j);
};

// Resolves a contract reference of mlasim_kut_info: JSON text ('{' first), "builtin:VARIANT", or
// a path (relative paths from `library_dir`); null = the built-in one of `call` (asm /
// mla_reduce_v1). Errors: InvalidArgument("--kernel-under-test") naming the reference and why
// (a parse error with its JSON path, a contract of another call kind).
StatusOr<std::shared_ptr<const sim::Contract>> ResolveKutContract(const char* reference,
                                                                  sim::CallKind call,
                                                                  const std::string& library_dir);

// The description a library's mlasim_kut_describe wrote into `info`, checked: some op, a known
// memory kind, page_size_multiple >= 0, contracts that resolve (ResolveKutContract, relative
// paths from `library_dir`). Errors: InvalidArgument("--kernel-under-test", "PATH: ...").
// KutLibrary::Open runs it after the ABI checks; the kut_description fuzz harness runs it alone.
StatusOr<KutDescription> DescriptionFromInfo(const mlasim_kut_info& info, const std::string& path,
                                             const std::string& config,
                                             const std::string& library_dir);

class KutLibrary {
 public:
  // dlopen(path, RTLD_NOW | RTLD_LOCAL), then the ABI version, the three required symbols and
  // mlasim_kut_describe(config). Errors: InvalidArgument("--kernel-under-test", "PATH: ...")
  // naming what is wrong: cannot be loaded (dlerror), a missing symbol, another ABI version
  // (both numbers), describe failing (its code and mlasim_kut_last_error), an unusable
  // description (no op, unknown memory kind), a contract that does not resolve.
  static StatusOr<std::unique_ptr<KutLibrary>> Open(const std::string& path,
                                                    const std::string& config);
  ~KutLibrary();
  KutLibrary(const KutLibrary&) = delete;
  KutLibrary& operator=(const KutLibrary&) = delete;

  const KutDescription& description() const { return desc_; }
  // mlasim_kut_run; returns its code and, unless MLASIM_KUT_OK, the library's last error.
  int Run(const mlasim_kut_call& call, std::string* error) const;

 private:
  KutLibrary() = default;
  void* handle_ = nullptr;
  mlasim_kut_run_fn run_ = nullptr;
  mlasim_kut_last_error_fn last_error_ = nullptr;
  KutDescription desc_;
};

// Where mlasim's own GPU kernel library is looked for: MLASIM_KUT_GPU_LIBRARY in the
// environment, else libmlasim_kut_gpu.so beside the running binary, else ../lib/ from it.
// "" when none exists (a GPU_BACKEND=NONE build).
std::string DefaultGpuKutPath();

// The name of an element type of kernels/mlasim_kut.h (MLASIM_KUT_BF16 .. MLASIM_KUT_INT32):
// "bf16", "fp16", "fp32", "fp8_e4m3fn", "int32"; "dtype N" for any other value.
std::string KutDtypeName(int32_t dtype);

}  // namespace mlasim::fuzz
