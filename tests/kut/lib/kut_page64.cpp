// tests/kut/lib/kut_page64.cpp - example kernel under test with FlashMLA's limits and no bug:
// mlasim's CPU kernel (kernels/kut/cpu_kernel.h) described as a dense-only, bf16-KV kernel whose
// page size must be a multiple of 64 (mlasim_kut_info.page_size_multiple = 64, max_page_size =
// 64), as libmlasim_kut_flashmla.so is. A campaign through it must generate steps it runs
// (tests/kut/kut_campaign_test.cpp): a call outside those limits is an error here (a KUT-fault
// finding), and every decode call appends "decode page P kv DTYPE sparse S" to the file
// $MLASIM_KUT_PAGE64_LOG names (when set), so the test sees what ran. Built a second time with
// MLASIM_KUT_PAGE64_TILE64 (libmlasim_kut_example_page64_tile64.so): the same limits with the
// tile64 bug (kut_tile64.cpp), whose findings must reproduce within the limits.
#include <cstdio>
#include <cstdlib>

#include "kernels/kut/cpu_kernel.h"

namespace {

#ifdef MLASIM_KUT_PAGE64_TILE64
constexpr const char* kName = "example-page64-tile64";
#else
constexpr const char* kName = "example-page64";
#endif

mlasim::kut_cpu::Bugs TheBugs() {
  mlasim::kut_cpu::Bugs b;
#ifdef MLASIM_KUT_PAGE64_TILE64
  b.store_tile64 = true;
#endif
  return b;
}

int Describe(const char* config, mlasim_kut_info* info) {
  const int rc = mlasim::kut_cpu::Describe(kName, config, info);
  if (rc != MLASIM_KUT_OK) return rc;
  info->q_dtypes = info->kv_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16);
  info->max_page_size = 64;
  info->page_size_multiple = 64;
  info->dense = 1;
  info->sparse = 0;
  return MLASIM_KUT_OK;
}

int Run(const mlasim_kut_call* call) {
  if (call != nullptr && call->op == MLASIM_KUT_OP_DECODE) {
    if (const char* path = std::getenv("MLASIM_KUT_PAGE64_LOG")) {
      if (FILE* f = std::fopen(path, "a")) {
        std::fprintf(f, "decode page %d kv %d sparse %d\n", call->page_size, call->kv_cache.dtype,
                     call->topk >= 0 ? 1 : 0);
        std::fclose(f);
      }
    }
    if (call->page_size % 64 != 0 || call->page_size > 64 || call->topk >= 0 ||
        call->kv_cache.dtype != MLASIM_KUT_BF16) {
      mlasim::kut_cpu::LastError() = "called outside its description: page size " +
                                     std::to_string(call->page_size) + ", topk " +
                                     std::to_string(call->topk);
      return MLASIM_KUT_ERROR;
    }
  }
  return mlasim::kut_cpu::Run(call, TheBugs());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) uint32_t mlasim_kut_abi_version(void) {
  return MLASIM_KUT_ABI_VERSION;
}
extern "C" __attribute__((visibility("default"))) int mlasim_kut_describe(const char* config,
                                                                          mlasim_kut_info* info) {
  return Describe(config, info);
}
extern "C" __attribute__((visibility("default"))) int mlasim_kut_run(const mlasim_kut_call* call) {
  return Run(call);
}
extern "C" __attribute__((visibility("default"))) const char* mlasim_kut_last_error(void) {
  return mlasim::kut_cpu::LastError().c_str();
}
