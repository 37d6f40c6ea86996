// tests/kut/lib/kut_broken.cpp - libraries the loader must refuse or contain, one per
// MLASIM_KUT_BROKEN value: 1 answers another ABI version, 2 lacks mlasim_kut_run, 3 crashes in
// mlasim_kut_run (a null store), 4 crashes in mlasim_kut_describe, 5 hangs in mlasim_kut_run,
// 6 describes an unknown memory kind, 7 describes no operation, 8 fails mlasim_kut_describe with
// a message, 9 names a contract that does not exist, 10 writes another ABI version into its info,
// 11 returns MLASIM_KUT_ERROR from every mlasim_kut_run, 12 only from the first mlasim_kut_run of
// its process (a kernel that is not deterministic: the shrink's replay no longer sees it), 13
// describes page_size_multiple -1.
#include <cstdint>

#include "kernels/mlasim_kut.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT uint32_t mlasim_kut_abi_version(void) {
  return MLASIM_KUT_BROKEN == 1 ? MLASIM_KUT_ABI_VERSION + 1 : MLASIM_KUT_ABI_VERSION;
}

EXPORT const char* mlasim_kut_last_error(void) {
  return MLASIM_KUT_BROKEN == 8 ? "no such device: example-broken8 needs a GPU it cannot find"
                                : "example-broken11 fails every call, 12 its first";
}

EXPORT int mlasim_kut_describe(const char*, mlasim_kut_info* info) {
  if (MLASIM_KUT_BROKEN == 4) *static_cast<volatile int*>(nullptr) = 1;
  if (MLASIM_KUT_BROKEN == 8) return MLASIM_KUT_ERROR;
  info->abi_version = MLASIM_KUT_BROKEN == 10 ? 0 : MLASIM_KUT_ABI_VERSION;
  info->name = "example-broken";
  info->ops = MLASIM_KUT_BROKEN == 7 ? 0
                                     : MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_DECODE) |
                                           MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_REDUCE);
  info->memory = MLASIM_KUT_BROKEN == 6 ? 7 : MLASIM_KUT_MEMORY_HOST;
  info->q_dtypes = info->kv_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16);
  info->o_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16);
  info->heads_multiple = info->head_dim_qk_multiple = info->head_dim_v_multiple = 1;
  info->max_head_dim_qk = info->max_head_dim_v = 1024;
  info->dense = info->sparse = 1;
  if (MLASIM_KUT_BROKEN == 9) info->decode_contract = "builtin:no-such-variant";
  if (MLASIM_KUT_BROKEN == 13) info->page_size_multiple = -1;
  return MLASIM_KUT_OK;
}

#if MLASIM_KUT_BROKEN != 2
EXPORT int mlasim_kut_run(const mlasim_kut_call*) {
  if (MLASIM_KUT_BROKEN == 3) *static_cast<volatile int*>(nullptr) = 1;
  if (MLASIM_KUT_BROKEN == 5)
    for (volatile int spin = 0;; spin = spin + 1) {
    }
  if (MLASIM_KUT_BROKEN == 11) return MLASIM_KUT_ERROR;
  static int runs = 0;
  if (MLASIM_KUT_BROKEN == 12 && runs++ == 0) return MLASIM_KUT_ERROR;
  return MLASIM_KUT_OK;
}
#endif
