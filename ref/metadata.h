// File: ref/metadata.h
//
// aiter's MLA decode metadata in its exact int32 form (aiter-mla-metadata.md §2, §3.2), the
// planner request that produces it, and the per-element write state that lets mlasim say which
// prefix of each buffer a planner wrote and which values depend on undefined memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ref/target.h"

namespace mlasim::ref {

// Arguments of get_mla_metadata_v1 plus the sizing inputs of get_mla_metadata_info_v1, in the
// order and units of the golden corpus's `input` object (aiter-mla-metadata.md §3.1).
struct PlanRequest {
  Arch target = Arch::kGfx942;
  Revision revision = Revision::k2026_08;
  int32_t cu_count = 0;           // multiProcessorCount; 0 = the target profile's count
  int32_t heads_per_head_k = 16;  // q heads per KV head (MLA: all q heads)
  int32_t num_heads_k = 1;        // KV heads (MLA: 1)
  DType q_dtype = DType::kBf16;
  DType kv_dtype = DType::kBf16;
  int32_t page_size = 1;        // tokens per page, power of two
  int32_t kv_granularity = 16;  // split granularity, pages, power of two
  int32_t qlen = 1;             // tokens per request given to the sizing helper
  int32_t max_seqlen_qo = 1;
  int32_t uni_seqlen_qo = 1;  // > 0: every request has this many q rows
  bool is_causal = true;
  int32_t topk = -1;                       // >= 0: aiter-native sparse mode (§8.1), tokens
  int32_t max_split_per_batch = -1;        // global split budget (§4.1), -1 = none
  bool is_cp_round_robin = false;          // disables the causal trim (§4.5)
  std::vector<int32_t> qo_indptr;          // [B+1] q rows per request, cumulative
  std::vector<int32_t> kv_indptr;          // [B+1] pages per request, cumulative
  std::vector<int32_t> kv_last_page_lens;  // [B] tokens in each last page (1..page_size)
};

// Which planner kernel runs. aiter's default dispatch runs the parallel planner whenever it is
// eligible (§4.6); tests can force either one.
enum class PlannerChoice : uint8_t { kAiterDispatch, kSerial, kParallel };

// Element counts of the six buffers as get_mla_metadata_info_v1 returns them (§2).
struct MetadataSizes {
  int32_t work_metadata_ptrs = 2;     // uint64
  int32_t work_indptr = 0;            // max_splits + 1
  int32_t work_info_rows = 0;         // max_work rows of 8 int32
  int32_t reduce_indptr = 0;          // tile_cnt + 1
  int32_t reduce_final_map_rows = 0;  // tile_cnt rows of 2 int32
  int32_t reduce_partial_map = 0;     // max_split_tiles
  // The intermediate values, for reports and the checker.
  int32_t max_splits = 0;
  int32_t max_qo_tiles_per_batch = 0;
  int32_t tile_cnt = 0;
};

// Host-side decisions of get_mla_metadata_v1_2_device and the kernel's scalars (§4.1), named as
// the golden corpus's `derived` object names them.
struct PlanDerived {
  int32_t num_clusters = 0;
  int32_t fold_ratio = 1;              // qk_batch_ratio R
  int32_t packed_qo_len_per_wg = 128;  // q tile pack
  bool qo_split = false;
  bool parallel_planner_used = false;
  int32_t num_splits = 0;
  int32_t planner_batches = 0;  // batches after folding (sparse walks x tokens per request)
  int32_t planner_heads = 0;    // heads after folding
  int32_t topk_pages = -1;
  int32_t fixed_overhead_blocks = 0;
  int32_t tail_done_threshold = 0;
  int32_t num_works = 0;
  int32_t payload = 0;  // cost units per cluster (§4.4)
  int32_t sum_blocks = 0;
  int32_t ori_seqlen_qo = 0;  // tokens per request (sparse: from qo_indptr)
  int32_t num_tiles = 0;      // q tiles planned (global tile counter at the end)
};

// Per-element state of a buffer the planner writes.
enum class Cell : uint8_t {
  kUnwritten = 0,  // no planner wrote it: stale memory on a GPU
  kWritten = 1,
  kUndefined = 2,  // written, but from an out-of-range input read: the value is unknowable
};

// One int32 buffer with its write state. Stores outside the buffer are not performed; they are
// recorded in `oob_writes` (a sizing/planner disagreement, bug class D).
struct Int32Buffer {
  std::vector<int32_t> data;
  std::vector<Cell> cells;
  int32_t row_width = 1;   // 8 for work_info, 2 for reduce_final_map
  int64_t oob_writes = 0;  // stores at index >= data.size()
  int64_t first_oob_index = -1;
  int64_t last_oob_index = -1;

  void Reset(int32_t elements, int32_t width);
  void Store(int64_t index, int32_t value, Cell cell = Cell::kWritten) {
    if (index < 0 || index >= static_cast<int64_t>(data.size())) return RecordOob(index);
    data[static_cast<size_t>(index)] = value;
    cells[static_cast<size_t>(index)] = cell;
  }
  void RecordOob(int64_t index);
  bool written(int64_t i) const { return cells[i] != Cell::kUnwritten; }
  int64_t size() const { return static_cast<int64_t>(data.size()); }
  // Length of the longest written prefix (elements).
  int64_t WrittenPrefix() const;
};

// A read by the planner of its own input past the input's end (e.g. kv_last_page_lens at a
// folded index, aiter-mla-metadata.md §4.5 / golden README). The value read is unknowable.
struct InputViolation {
  std::string array;        // "kv_last_page_lens"
  int64_t index = 0;        // element read
  int64_t size = 0;         // elements the array holds
  int32_t work_row = -1;    // work_info row whose value depends on it, -1 if none
  int32_t work_field = -1;  // dword of that row
};

// The six buffers as one plan. The value stored in unwritten cells is kPoison.
struct Plan {
  static constexpr int32_t kPoison = -0x5A5A5A5B;  // 0xA5A5A5A5 as int32
  MetadataSizes sizes;
  PlanDerived derived;
  uint64_t work_metadata_ptrs[2] = {0, 0};  // modelled: offsets, not device pointers
  Int32Buffer work_indptr;
  Int32Buffer work_info;
  Int32Buffer reduce_indptr;
  Int32Buffer reduce_final_map;
  Int32Buffer reduce_partial_map;
  std::vector<InputViolation> input_violations;
  // decode_update history: the fold ratio each update applied (its own native decision).
  std::vector<int32_t> update_fold_ratios;

  int32_t num_works() const { return derived.num_works; }
  // Field f (0..7) of work row w.
  int32_t work(int32_t w, int32_t f) const { return work_info.data[int64_t{w} * 8 + f]; }
};

// work_info dword names (MlaWorkInfo, §3.2).
enum WorkField : int32_t {
  kBatchIdx = 0,
  kPartialQoLoc = 1,
  kQoStart = 2,
  kQoEnd = 3,
  kKvStart = 4,
  kKvEnd = 5,
  kKvOffset = 6,
  kPad = 7,
};
const char* WorkFieldName(int32_t field);

}  // namespace mlasim::ref
