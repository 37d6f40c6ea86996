// kernels/decode/schedule.h - how every decode kernel consumes the plan (aiter-mla-metadata.md
// §11): a workgroup walks work_info rows [work_indptr[c], work_indptr[c + 1]) of its cluster and
// each work item's q tile in groups of kRows rows; the KV positions of a group become cache rows
// (dense pages or the sparse top-k list, invalid ones masked); the causal limit; the access log.
#pragma once

#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/params.h"
#include "kernels/gpu_api.h"

namespace mlasim::gpu::decode {

__device__ inline uint16_t f2bf(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// KV-cache row of position pos in [p0, p1) of a work item; -1 = masked (never read). In two
// halves, so that a kernel can issue the index load (key_index) an iteration before it needs the
// row (key_row_of): the load's latency then overlaps that iteration instead of stalling it.
// key_index: the int32 the row comes from (the top-k entry, or the page id), 0 past p1.
__device__ inline int32_t key_index(const DecodeParams& P, int64_t pos, int64_t p1) {
  if (pos >= p1) return 0;
  if (P.sparse) return P.topk[pos];
  // 32-bit index math (positions stay below 2^30, ValidatePlanRequest): 64-bit division is slow.
  const int32_t p32 = static_cast<int32_t>(pos);
  return P.kv_indices[P.page == 1 ? p32 : p32 / P.page];
}
__device__ inline int64_t key_row_of(const DecodeParams& P, int64_t pos, int64_t p1,
                                     int32_t index) {
  if (pos >= p1) return -1;
  const int64_t r =
      P.sparse || P.page == 1
          ? int64_t{index}
          : int64_t{index} * P.page + static_cast<int32_t>(pos) % P.page;
  return (r < 0 || r >= P.cache_rows) ? -1 : r;
}
__device__ inline int64_t key_row(const DecodeParams& P, int64_t pos, int64_t p1) {
  return key_row_of(P, pos, p1, key_index(P, pos, p1));
}

// Access log: rows [r0, r1) of q (slot 0) or o (slot 2), recorded by one thread (`leader`).
__device__ inline void log_rows(unsigned long long* log, int slot, int64_t r0, int64_t r1,
                                bool leader) {
  if (log == nullptr || !leader || r1 <= r0) return;
  atomicMin(&log[slot], static_cast<unsigned long long>(r0));
  atomicMax(&log[slot + 1], static_cast<unsigned long long>(r1));
}

// Causal rule (§11): the last key position (relative to the work item's first key) that the
// group's token may see, plus one. INT64_MAX when the call is not causal.
__device__ inline int64_t causal_limit(const DecodeParams& P, const GroupTask& t, int64_t token) {
  return P.causal ? (token - t.req_q0) + t.lk - t.lq + 1 - t.key_first : INT64_MAX;
}

// Flat (row, head) index of the group's first row.
__device__ inline int64_t group_first_row(const DecodeParams& P, const GroupTask& t) {
  return int64_t{t.w[2]} * P.H + int64_t{t.g} * t.rows;
}

// One work item of a cluster as for_each_group runs it: its 8 ints and its key range
// [p0, p1) (positions into kv_indices, or into the token's top-k list), with the causal fields.
struct WorkItem {
  int32_t w[8];
  int64_t p0, p1, key_first, lk, lq, req_q0;
};

// Loads the first work item in rows [wi, w1) that runs (the opus variant returns before reading
// anything for a zero-KV item, §11 variants) into `item`; returns its row, w1 when none is left.
__device__ inline int32_t load_work_item(const DecodeParams& P, int32_t wi, int32_t w1,
                                         WorkItem& item) {
  for (; wi < w1; ++wi) {
    int32_t* w = item.w;
    for (int f = 0; f < 8; ++f) w[f] = P.work_info[int64_t{wi} * 8 + f];
    if (P.variant == static_cast<int>(ZeroKvVariant::kOpus) && w[5] <= w[4]) continue;
    item.key_first = item.lk = item.lq = item.req_q0 = 0;
    if (P.sparse) {
      item.p0 = w[4];
      item.p1 = w[5];
    } else {
      const int64_t page = P.page;
      const int32_t b = w[0];
      item.p0 = int64_t{w[4]} * page;
      item.p1 = (w[6] != 0 || page == 1) ? int64_t{w[5]} * page
                                         : int64_t{w[5] - 1} * page + P.lpl[b];
      if (P.causal) {
        const int64_t pages = P.kv_indptr[b + 1] - P.kv_indptr[b];
        item.lk = pages == 0 ? 0 : (pages - 1) * page + P.lpl[b];
        item.lq = P.qo_indptr[b + 1] - P.qo_indptr[b];
        item.req_q0 = P.qo_indptr[b];
        item.key_first = item.p0 - int64_t{P.kv_indptr[b]} * page;
      }
    }
    if (item.p1 < item.p0) item.p1 = item.p0;
    return wi;
  }
  return w1;
}

// Walks the cluster's work items (blockIdx.x = cluster) and calls fn(GroupTask) per group of
// kGroupRows q rows (16, or 32 for the two-tile lock-step kernel; P.H a multiple of it, so that a
// group's rows are heads of one token). Each task names the group that follows it (the next
// group of the item, or the first of the next item that runs), read an item ahead.
// Every thread of a workgroup walks the same sequence, so roles (a producer warp, consumer
// warps) stay in step without talking.
template <int kGroupRows = kRows, class Fn>
__device__ inline void for_each_group(const DecodeParams& P, Fn&& fn) {
  const int c = blockIdx.x;
  const int32_t w1 = P.work_indptr[c + 1];
  WorkItem it, next;
  int32_t wi = load_work_item(P, P.work_indptr[c], w1, it);
  while (wi < w1) {
    const int32_t wn = load_work_item(P, wi + 1, w1, next);
    GroupTask t{it.w, it.p0, it.p1, it.key_first, it.lk, it.lq, it.req_q0, 0, kGroupRows,
                0, 0, -1};
    const int groups = (it.w[3] - it.w[2]) * P.H / kGroupRows;
    for (t.g = 0; t.g < groups; ++t.g) {
      if (t.g + 1 < groups) {
        t.next_p0 = it.p0, t.next_p1 = it.p1;
        t.next_first = int64_t{it.w[2]} * P.H + int64_t{t.g + 1} * kGroupRows;
      } else if (wn < w1) {
        t.next_p0 = next.p0, t.next_p1 = next.p1;
        t.next_first = int64_t{next.w[2]} * P.H;
      } else {
        t.next_first = -1;
      }
      fn(t);
    }
    it = next;
    wi = wn;
  }
}

}  // namespace mlasim::gpu::decode
