// File: ref/flashinfer/mla_plan.h
//
// FlashInfer's MLAPlan (flashinfer-ai/flashinfer fb28d72, include/flashinfer/attention/
// scheduler.cuh), bit-exact on the CPU: the host planner of the MLA decode/prefill kernels
// (fa3 mla::BatchMLAPageAttentionHopper, fa2 mla::BatchMLAPagedAttention).
//
//   step 0  cluster shape: 2 CTAs per cluster when the batch's average packed q length
//           (q tokens * heads) exceeds 64, else 1; num_sm / cluster_size clusters; q tiles of
//           64 * cluster_size packed rows.
//   step 1  every q tile (requests in order, tiles from last to first) is cut into KV chunks of
//           at most kv_len_limit tokens; each chunk goes to the cluster of least accumulated
//           cost (CostHeap, libstdc++'s tie order). Split tiles get partial-output rows and
//           merge entries.
//   then    the lists are written into a caller-sized int workspace at fixed-capacity regions
//           (16384 works each; `max_total_num_works`, "adjust it later") and the float
//           workspace gets partial_o / partial_lse regions.
//
// FlashInfer never checks that the work count fits its regions: past 16384 works std::copy
// writes over the next region (and past the buffer). The model computes the full lists, never
// truncates, and reports every list that outgrows its region in MLAPlanResult::overflows; the
// image the device would receive is IntWorkspaceImage().
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ref/flashinfer/plan_info.h"
#include "ref/flashinfer/workspace.h"
#include "ref/status.h"

namespace mlasim::ref::flashinfer {

// Entries per work-list region: `max_total_num_works` (scheduler.cuh:1740).
inline constexpr int32_t kMaxTotalNumWorks = 16384;
inline constexpr int32_t kCtaTileQ = 64;              // packed q rows per CTA
inline constexpr int32_t kClusterSizeThreshold = 64;  // avg packed q len above it: 2 CTAs/cluster
inline constexpr int32_t kRegionAlignment = 16;       // bytes, every region
inline constexpr int64_t kPartialOElementBytes = 2;   // sizeof_dtype_o: partial o is 16-bit
// Bounds the model accepts (allocation proportional to them happens only below them).
inline constexpr int32_t kMaxBatchSize = 1 << 20;
inline constexpr int32_t kMaxNumSm = 1 << 16;
inline constexpr int32_t kMaxNumHeads = 1024;
inline constexpr int32_t kMaxHeadDimO = 1 << 16;
inline constexpr int32_t kMaxKvLen = (1 << 30) - 1;  // remaining_len * 2 stays in int32

struct MLAPlanInput {
  std::vector<int32_t>
      qo_indptr;  // [b + 1] query tokens: request i owns [qo_indptr[i], qo_indptr[i+1])
  std::vector<int32_t>
      kv_indptr;  // [b + 1] pages: request i's page-table entries start at kv_indptr[i]
  std::vector<int32_t> kv_len;         // [b] KV tokens per request, 0..kMaxKvLen
  int32_t num_heads = 0;               // query heads (rows packed per q token), 1..kMaxNumHeads
  int32_t head_dim_o = 512;            // head_dim_ckv: the partial-o row width
  bool causal = false;                 // bottom-right aligned causal mask per request
  int32_t num_sm = 0;                  // device SM count (cudaDevAttrMultiProcessorCount), >= 1
  uint64_t int_workspace_bytes = 0;    // the int workspace and its page-locked staging buffer
  uint64_t float_workspace_bytes = 0;  // the float workspace
};

// One list MLAPlan writes into the int workspace, in allocation (= copy) order.
enum class ListCapacity : uint8_t {
  kMaxTotalNumWorks,  // region of kMaxTotalNumWorks entries (work lists and work_indptr)
  kNumSm,             // region of num_sm entries (merge lists)
};

struct MLAPlanResult;
struct IntListSpec {
  const char* region;                         // FlashInfer's allocation name
  std::vector<int32_t> MLAPlanResult::*list;  // the values written there
  int64_t MLAPlanInfo::*offset;               // the MLAPlanInfo field that records the region
  ListCapacity capacity;
};

// A list longer than its region: FlashInfer writes the rest over whatever follows.
struct ListOverflow {
  std::string region;
  int64_t entries = 0;           // entries written
  int64_t capacity_entries = 0;  // entries the region holds
};

struct MLAPlanResult {
  MLAPlanInfo info;
  // step 0 decisions
  int32_t batch_size = 0;
  int32_t cluster_size = 0;    // == info.num_blks_x
  int32_t num_clusters = 0;    // == info.num_blks_y
  int32_t cluster_tile_q = 0;  // packed q rows per tile: kCtaTileQ * cluster_size
  int64_t total_kv_lens = 0;   // sum over tiles of the (causal) KV length, tokens
  int32_t kv_len_limit = 0;    // tokens per KV chunk, at most
  // Work lists, [total_num_works], cluster-major: cluster c runs works
  // [work_indptr[c], work_indptr[c+1]).
  std::vector<int32_t> work_indptr;     // [num_clusters + 1]
  std::vector<int32_t> q_indptr;        // q token offset of the work's request (qo_indptr[i])
  std::vector<int32_t> kv_indptr;       // page offset of the request (kv_indptr[i])
  std::vector<int32_t> partial_indptr;  // first partial-o row, -1 when the tile is not split
  std::vector<int32_t> q_len;           // q tokens of the request
  std::vector<int32_t> kv_len;          // KV tokens of the request
  std::vector<int32_t> q_start;         // first packed q row of the tile (within the request)
  std::vector<int32_t> kv_start;        // first KV token of the chunk (inclusive)
  std::vector<int32_t> kv_end;          // KV token past the chunk (exclusive)
  // Merge lists, [num_sm]: entry m < merge_cta_counter merges packed rows
  // [merge_packed_offset_start, _end) (absolute: qo_indptr * heads + row) from partial rows
  // merge_partial_packed_offset_start + k * merge_partial_stride, below _end. Later entries 0.
  std::vector<int32_t> merge_packed_offset_start;
  std::vector<int32_t> merge_packed_offset_end;
  std::vector<int32_t> merge_partial_packed_offset_start;
  std::vector<int32_t> merge_partial_packed_offset_end;
  std::vector<int32_t> merge_partial_stride;
  int32_t merge_cta_counter = 0;  // merge entries used, <= num_sm
  int32_t partial_o_nnz = 0;      // partial rows used, <= 2 * num_clusters * cluster_tile_q
  // Workspaces
  std::vector<WorkspaceRegion> int_regions;    // allocation order (kIntLists)
  std::vector<WorkspaceRegion> float_regions;  // mla_partial_o, mla_partial_lse
  int64_t int_allocated_bytes = 0;             // bytes copied to the device (num_allocated_bytes())
  int64_t float_allocated_bytes = 0;
  std::vector<ListOverflow> overflows;  // empty when every list fits its region

  int32_t total_num_works() const { return static_cast<int32_t>(q_indptr.size()); }
};

// The int-workspace lists in allocation and copy order (one table read by the layout, the
// overflow report, the image and the corpus serialisation).
extern const std::array<IntListSpec, 14> kIntLists;
inline constexpr const char* kPartialORegion = "mla_partial_o";
inline constexpr const char* kPartialLseRegion = "mla_partial_lse";

// Checks every input; errors name the field. InvalidArgument for malformed values (lengths,
// negative q length as FlashInfer's own FLASHINFER_ERROR, decreasing kv_indptr, ranges);
// FailedPrecondition for inputs FlashInfer crashes on (batch 0: division by zero; a one-SM
// device with 2-CTA clusters: zero clusters); OutOfRange when packed offsets or KV totals leave
// int32.
Status ValidateMLAPlanInput(const MLAPlanInput& input);

// Runs MLAPlan. Errors: ValidateMLAPlanInput's, and OutOfRange(region) when a region does not
// fit the caller's workspace (FlashInfer's AlignedAllocator error).
StatusOr<MLAPlanResult> MLAPlan(const MLAPlanInput& input);

struct MLAWorkspaceSizes {
  int64_t int_bytes = 0;
  int64_t float_bytes = 0;
  std::vector<WorkspaceRegion> int_regions;
  std::vector<WorkspaceRegion> float_regions;
  MLAPlanInfo info;  // the offsets (num_blks_x/y filled too)
};
// Workspace bytes MLAPlan needs for a device of num_sm SMs at a cluster size (1 or 2): the same
// layout code in counting mode. FlashInfer has no such query for MLAPlan.
StatusOr<MLAWorkspaceSizes> MLAPlanWorkspaceSize(int32_t num_sm, int32_t cluster_size,
                                                 int32_t head_dim_o);
// The same for the cluster size `input` would get (workspace sizes in `input` are ignored).
StatusOr<MLAWorkspaceSizes> MLAPlanWorkspaceSize(const MLAPlanInput& input);

// The page-locked int buffer of `buffer_bytes` after MLAPlan's std::copy calls, in order
// (little-endian int32; later lists overwrite earlier overflow). Bytes never written are 0.
// The device receives the first int_allocated_bytes of it.
struct IntWorkspaceImage {
  std::vector<uint8_t> bytes;             // [buffer_bytes]
  int64_t bytes_written_past_buffer = 0;  // stores beyond buffer_bytes (heap overflow on a host)
};
IntWorkspaceImage RenderIntWorkspace(const MLAPlanResult& plan, int64_t buffer_bytes);

}  // namespace mlasim::ref::flashinfer
