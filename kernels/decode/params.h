// kernels/decode/params.h - the decode kernels' launch parameters (one POD struct, passed by
// value) and the per-group task the schedule hands to a kernel body. Included only by
// kernels/decode.hip (after kernels/hip_compat.h).
#pragma once

#include <cstdint>

namespace mlasim::gpu::decode {

// Everything a decode launch reads and writes. Row counts are q rows (tokens); every buffer is
// row-major with the head dimension innermost. "bf16" pointers hold raw bf16 bits.
struct DecodeParams {
  const uint16_t* q;           // bf16 [q rows, H, D]; used when q_fp8 == 0
  const uint8_t* q8;           // fp8 e4m3fn [q rows, H, D]; used when q_fp8 == 1
  const uint16_t* kv;          // bf16 [cache rows, D]; used when kv_fp8 == 0
  const uint8_t* kv8;          // fp8 e4m3fn [cache rows, D]; used when kv_fp8 == 1
  const int32_t* kv_indices;   // dense: page ids [kv_indptr[b] .. kv_indptr[b + 1]) per request
  const int32_t* kv_indptr;    // [batch + 1], pages
  const int32_t* lpl;          // kv_last_page_lens [batch], tokens
  const int32_t* qo_indptr;    // [batch + 1], q rows
  const int32_t* topk;         // sparse: [q rows, topk] cache rows, -1 = invalid; else unused
  const int32_t* work_indptr;  // [clusters + 1] (aiter-mla-metadata.md §11)
  const int32_t* work_info;    // [works, 8]
  uint16_t* o;                 // bf16 [o rows, H, Dv]
  float* lse;                  // fp32 [o rows, H]
  float* part_o;               // fp32 [partial rows, H, Dv]
  float* part_lse;             // fp32 [partial rows, H]
  unsigned long long* log;     // access log [q min, q max + 1, o min, o max + 1]; may be nullptr
  int32_t H, D, Dv, page, sparse, causal, batch, variant, kv_fp8, q_fp8;
  int32_t parts;       // workgroups per cluster (blockIdx.x = cluster x parts + part); 1 but for
                       // the heads-as-M kernel (sm90/heads_m.h), which splits the heads
  int64_t cache_rows;  // rows of kv / kv8 (pages x page size)
  float logit_scale;   // softmax scale x q scale x kv scale (natural-log units)
  float v_scale;       // kv scale applied to o
};

// What one group (16 rows, or 32 or 64: GroupTask::rows) of a work item covers: keys [p0, p1)
// (positions into kv_indices, or into the token's top-k list), and for the causal rule the
// request's KV length lk, q length lq, first q row req_q0 and the position of p0 within the
// request (key_first).
struct GroupTask {
  const int32_t* w;  // the work item's 8 ints (work_info row)
  int64_t p0, p1, key_first, lk, lq, req_q0;
  int g;     // group index within the tile
  int rows;  // q rows per group (kRows, or a multiple: for_each_group's kGroupRows)
  // The group this workgroup runs next (for_each_group): its keys [next_p0, next_p1) and the
  // flat (row, head) index of its first q row; next_first < 0 when this group is the last.
  // A kernel may start the next group's loads while this group's last chunks run.
  int64_t next_p0, next_p1, next_first;
};

}  // namespace mlasim::gpu::decode
