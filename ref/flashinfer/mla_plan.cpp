#include "ref/flashinfer/mla_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "ref/flashinfer/cost_heap.h"

namespace mlasim::ref::flashinfer {

const std::array<IntListSpec, 14> kIntLists = {{
    {"mla_q_indptr", &MLAPlanResult::q_indptr, &MLAPlanInfo::q_indptr_offset,
     ListCapacity::kMaxTotalNumWorks},
    {"mla_kv_indptr", &MLAPlanResult::kv_indptr, &MLAPlanInfo::kv_indptr_offset,
     ListCapacity::kMaxTotalNumWorks},
    {"mla_partial_indptr", &MLAPlanResult::partial_indptr, &MLAPlanInfo::partial_indptr_offset,
     ListCapacity::kMaxTotalNumWorks},
    {"mla_merge_packed_offset_start", &MLAPlanResult::merge_packed_offset_start,
     &MLAPlanInfo::merge_packed_offset_start_offset, ListCapacity::kNumSm},
    {"mla_merge_packed_offset_end", &MLAPlanResult::merge_packed_offset_end,
     &MLAPlanInfo::merge_packed_offset_end_offset, ListCapacity::kNumSm},
    {"mla_merge_partial_packed_offset_start", &MLAPlanResult::merge_partial_packed_offset_start,
     &MLAPlanInfo::merge_partial_packed_offset_start_offset, ListCapacity::kNumSm},
    {"mla_merge_partial_packed_offset_end", &MLAPlanResult::merge_partial_packed_offset_end,
     &MLAPlanInfo::merge_partial_packed_offset_end_offset, ListCapacity::kNumSm},
    {"mla_merge_partial_stride", &MLAPlanResult::merge_partial_stride,
     &MLAPlanInfo::merge_partial_stride_offset, ListCapacity::kNumSm},
    {"mla_q_len", &MLAPlanResult::q_len, &MLAPlanInfo::q_len_offset,
     ListCapacity::kMaxTotalNumWorks},
    {"mla_kv_len", &MLAPlanResult::kv_len, &MLAPlanInfo::kv_len_offset,
     ListCapacity::kMaxTotalNumWorks},
    {"mla_q_start", &MLAPlanResult::q_start, &MLAPlanInfo::q_start_offset,
     ListCapacity::kMaxTotalNumWorks},
    {"mla_kv_start", &MLAPlanResult::kv_start, &MLAPlanInfo::kv_start_offset,
     ListCapacity::kMaxTotalNumWorks},
    {"mla_kv_end", &MLAPlanResult::kv_end, &MLAPlanInfo::kv_end_offset,
     ListCapacity::kMaxTotalNumWorks},
    {"mla_work_indptr", &MLAPlanResult::work_indptr, &MLAPlanInfo::work_indptr_offset,
     ListCapacity::kMaxTotalNumWorks},
}};

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

template <typename T>
T CeilDiv(T a, T b) {
  return (a + b - 1) / b;  // flashinfer::ceil_div
}

int64_t CapacityEntries(ListCapacity c, int32_t num_sm) {
  return c == ListCapacity::kNumSm ? num_sm : kMaxTotalNumWorks;
}

// scheduler.cuh packed_causal_kv_end: the KV end of q tile `tile` under a bottom-right causal
// mask, in tokens; the last tile sees the whole request.
int32_t PackedCausalKvEnd(int32_t qo_len, int32_t kv_len, int32_t tile, int32_t tile_q,
                          int32_t num_tiles, int32_t group_size) {
  if (tile + 1 == num_tiles) return kv_len;
  const int32_t kv_len_init = kv_len - qo_len;  // right aligned
  return std::max(std::min(kv_len_init + CeilDiv((tile + 1) * tile_q, group_size), kv_len), 0);
}

// MLAPlan's lambda `f` (scheduler.cuh:1635): the KV chunk length for an average per-cluster KV
// length x.
int32_t KvLenLimit(int64_t x) {
  if (x <= 8) return 32;
  if (x <= 16) return 64;
  if (x <= 32) return 128;
  if (x <= 64) return 192;
  return static_cast<int32_t>(CeilDiv<int64_t>(x, 256) * 256);
}

// scheduler.cuh cost_function(qo_len, kv_len): float arithmetic, as FlashInfer.
float CostFunction(int32_t qo_len, int32_t kv_len) {
  return 2 * float(qo_len) + kv_len;
}

int32_t QoLen(const MLAPlanInput& in, int32_t i) {
  return in.qo_indptr[i + 1] - in.qo_indptr[i];
}

Status ValidateLengths(const MLAPlanInput& in) {
  const size_t b = in.kv_len.size();
  if (b > static_cast<size_t>(kMaxBatchSize))
    return InvalidArgumentError("kv_len",
                                fmt::format("has {} entries, at most {}", b, kMaxBatchSize));
  if (b == 0)
    return FailedPreconditionError(
        "kv_len",
        "batch_size is 0: MLAPlan divides the packed q length by batch_size (an "
        "integer division by zero that kills the process)");
  if (in.qo_indptr.size() != b + 1)
    return InvalidArgumentError("qo_indptr", fmt::format("has {} entries, expected batch_size + 1 "
                                                         "= {}",
                                                         in.qo_indptr.size(), b + 1));
  if (in.kv_indptr.size() != b + 1)
    return InvalidArgumentError("kv_indptr", fmt::format("has {} entries, expected batch_size + 1 "
                                                         "= {}",
                                                         in.kv_indptr.size(), b + 1));
  return OkStatus();
}

Status ValidateArrays(const MLAPlanInput& in) {
  if (in.qo_indptr[0] < 0 || in.kv_indptr[0] < 0)
    return InvalidArgumentError(in.qo_indptr[0] < 0 ? "qo_indptr[0]" : "kv_indptr[0]",
                                "is negative");
  for (size_t i = 0; i < in.kv_len.size(); ++i) {
    if (in.qo_indptr[i + 1] < in.qo_indptr[i])  // FlashInfer's own FLASHINFER_ERROR
      return InvalidArgumentError(fmt::format("qo_indptr[{}]", i + 1),
                                  fmt::format("{} - qo_indptr[{}] {} should be non-negative",
                                              in.qo_indptr[i + 1], i, in.qo_indptr[i]));
    if (in.kv_indptr[i + 1] < in.kv_indptr[i])
      return InvalidArgumentError(
          fmt::format("kv_indptr[{}]", i + 1),
          fmt::format("{} is below kv_indptr[{}] = {}", in.kv_indptr[i + 1], i, in.kv_indptr[i]));
    if (in.kv_len[i] < 0 || in.kv_len[i] > kMaxKvLen)
      return InvalidArgumentError(
          fmt::format("kv_len[{}]", i),
          fmt::format("is {}, must be in [0, {}]", in.kv_len[i], kMaxKvLen));
  }
  return OkStatus();
}

Status ValidateScalars(const MLAPlanInput& in) {
  if (in.num_heads < 1 || in.num_heads > kMaxNumHeads)
    return InvalidArgumentError(
        "num_heads", fmt::format("is {}, must be in [1, {}]", in.num_heads, kMaxNumHeads));
  if (in.head_dim_o < 1 || in.head_dim_o > kMaxHeadDimO)
    return InvalidArgumentError(
        "head_dim_o", fmt::format("is {}, must be in [1, {}]", in.head_dim_o, kMaxHeadDimO));
  if (in.num_sm < 1 || in.num_sm > kMaxNumSm)
    return InvalidArgumentError("num_sm",
                                fmt::format("is {}, must be in [1, {}]", in.num_sm, kMaxNumSm));
  // Packed row offsets (qo_indptr * heads + row) are computed in uint32 and stored as int32.
  const int64_t packed_end = int64_t{in.qo_indptr.back()} * in.num_heads + 2 * kCtaTileQ;
  if (packed_end > kInt32Max)
    return OutOfRangeError("qo_indptr", fmt::format("qo_indptr[b] * num_heads = {} leaves int32",
                                                    packed_end - 2 * kCtaTileQ));
  return OkStatus();
}

// step 0: cluster shape (scheduler.cuh:1590-1630).
Status DecideClusters(const MLAPlanInput& in, MLAPlanResult* p) {
  p->batch_size = static_cast<int32_t>(in.kv_len.size());
  int64_t accum_packed_qo_len = 0;
  for (int32_t i = 0; i < p->batch_size; ++i)
    accum_packed_qo_len += int64_t{QoLen(in, i)} * in.num_heads;
  const int64_t avg_packed_qo_len = accum_packed_qo_len / p->batch_size;
  p->cluster_size = avg_packed_qo_len > kClusterSizeThreshold ? 2 : 1;
  p->num_clusters = in.num_sm / p->cluster_size;
  p->cluster_tile_q = p->cluster_size * kCtaTileQ;
  if (p->num_clusters < 1)
    return FailedPreconditionError(
        "num_sm", fmt::format("{} SM with 2-CTA clusters gives 0 clusters: MLAPlan divides by "
                              "zero",
                              in.num_sm));
  p->info.num_blks_x = p->cluster_size;
  p->info.num_blks_y = p->num_clusters;
  return OkStatus();
}

int32_t NumQoTiles(const MLAPlanInput& in, const MLAPlanResult& p, int32_t i) {
  return CeilDiv(QoLen(in, i) * in.num_heads, p.cluster_tile_q);
}

int32_t TileKvLen(const MLAPlanInput& in, const MLAPlanResult& p, int32_t i, int32_t tile) {
  return in.causal ? PackedCausalKvEnd(QoLen(in, i), in.kv_len[i], tile, p.cluster_tile_q,
                                       NumQoTiles(in, p, i), in.num_heads)
                   : in.kv_len[i];
}

// step 0, continued: the KV chunk limit from the total KV length over all tiles.
Status DecideKvLenLimit(const MLAPlanInput& in, MLAPlanResult* p) {
  p->total_kv_lens = 0;
  for (int32_t i = 0; i < p->batch_size; ++i)
    for (int32_t t = NumQoTiles(in, *p, i) - 1; t >= 0; --t)
      p->total_kv_lens += TileKvLen(in, *p, i, t);
  const int64_t per_cluster =
      std::max<int64_t>(CeilDiv<int64_t>(p->total_kv_lens, p->num_clusters), 1);
  if (per_cluster > kMaxKvLen)
    return OutOfRangeError("kv_len", fmt::format("{} KV tokens per cluster leave MLAPlan's int "
                                                 "kv_len_limit",
                                                 per_cluster));
  p->kv_len_limit = KvLenLimit(per_cluster);
  return OkStatus();
}

struct Work {
  int32_t q_indptr, kv_indptr, partial_indptr, q_len, kv_len, q_start, kv_start, kv_end;
};

// Merge entries of a split tile (the "Proof(Zihao)" block bounds their count by num_sm).
void AddMergeEntries(const MLAPlanInput& in, int32_t i, int32_t tile, int32_t remaining,
                     int32_t row_tile_size, MLAPlanResult* p) {
  const int32_t num_qo_chunks = std::max(remaining * p->cluster_size / p->kv_len_limit, 1);
  const int32_t row_chunk_size = CeilDiv(row_tile_size, num_qo_chunks);
  const int32_t base = in.qo_indptr[i] * in.num_heads + tile * p->cluster_tile_q;
  for (int32_t off = 0; off < row_tile_size; off += row_chunk_size) {
    const int32_t m = p->merge_cta_counter++;
    // Proof (scheduler.cuh "Proof(Zihao)"): each split tile has remaining > kv_len_limit, so it
    // adds floor(remaining * cluster_size / kv_len_limit) >= 1 entries at most, and the sum of
    // remaining is <= kv_len_limit * num_clusters: at most cluster_size * num_clusters <= num_sm.
    MLASIM_ASSERT(m < in.num_sm, fmt::format("merge entry {} of {}", m, in.num_sm));
    p->merge_packed_offset_start[m] = base + off;
    p->merge_packed_offset_end[m] = base + std::min(off + row_chunk_size, row_tile_size);
    p->merge_partial_packed_offset_start[m] = p->partial_o_nnz + off;
    p->merge_partial_packed_offset_end[m] =
        p->partial_o_nnz + CeilDiv(remaining, p->kv_len_limit) * row_tile_size;
    p->merge_partial_stride[m] = row_tile_size;
  }
}

// step 1 for one q tile (scheduler.cuh:1666-1733): KV chunks to the least-loaded clusters.
void ScheduleTile(const MLAPlanInput& in, int32_t i, int32_t tile, CostHeap* heap,
                  std::vector<std::vector<Work>>* clusters, MLAPlanResult* p) {
  int32_t remaining = TileKvLen(in, *p, i, tile);
  const int32_t packed_qo_len = QoLen(in, i) * in.num_heads;
  const bool split_kv = remaining > p->kv_len_limit;
  const int32_t row_tile_size =
      std::min(p->cluster_tile_q, packed_qo_len - tile * p->cluster_tile_q);
  if (split_kv) AddMergeEntries(in, i, tile, remaining, row_tile_size, p);
  const bool zero_kv_len = remaining == 0;
  int32_t kv_start = 0;
  while (remaining > 0 || zero_kv_len) {
    const HeapEntry top = heap->Pop();
    const int32_t actual_len = std::min(remaining, p->kv_len_limit);
    heap->Insert({top.index, top.cost + CostFunction(p->cluster_tile_q, actual_len)});
    const int32_t partial = split_kv ? p->partial_o_nnz : -1;
    if (split_kv) p->partial_o_nnz += row_tile_size;
    (*clusters)[top.index].push_back({in.qo_indptr[i], in.kv_indptr[i], partial, QoLen(in, i),
                                      in.kv_len[i], tile * p->cluster_tile_q, kv_start,
                                      kv_start + actual_len});
    remaining -= actual_len;
    kv_start += actual_len;
    if (zero_kv_len) break;
  }
}

void Flatten(const std::vector<std::vector<Work>>& clusters, MLAPlanResult* p) {
  p->work_indptr.assign(clusters.size() + 1, 0);
  for (size_t c = 0; c < clusters.size(); ++c) {
    p->work_indptr[c + 1] = p->work_indptr[c] + static_cast<int32_t>(clusters[c].size());
    for (const Work& w : clusters[c]) {
      p->q_indptr.push_back(w.q_indptr);
      p->kv_indptr.push_back(w.kv_indptr);
      p->partial_indptr.push_back(w.partial_indptr);
      p->q_len.push_back(w.q_len);
      p->kv_len.push_back(w.kv_len);
      p->q_start.push_back(w.q_start);
      p->kv_start.push_back(w.kv_start);
      p->kv_end.push_back(w.kv_end);
    }
  }
}

void Schedule(const MLAPlanInput& in, MLAPlanResult* p) {
  CostHeap heap(p->num_clusters);
  std::vector<std::vector<Work>> clusters(p->num_clusters);
  for (auto* list : {&p->merge_packed_offset_start, &p->merge_packed_offset_end,
                     &p->merge_partial_packed_offset_start, &p->merge_partial_packed_offset_end,
                     &p->merge_partial_stride})
    list->assign(in.num_sm, 0);
  for (int32_t i = 0; i < p->batch_size; ++i)
    for (int32_t t = NumQoTiles(in, *p, i) - 1; t >= 0; --t)
      ScheduleTile(in, i, t, &heap, &clusters, p);
  Flatten(clusters, p);
}

// The int and float regions (scheduler.cuh:1740-1784 and 1839-1844), in FlashInfer's allocation
// order, through one allocator per workspace (counting or real mode).
Status Layout(int32_t num_sm, int32_t num_clusters, int32_t cluster_tile_q, int32_t head_dim_o,
              RegionAllocator* int_alloc, RegionAllocator* float_alloc, MLAPlanInfo* info) {
  for (const IntListSpec& spec : kIntLists) {
    const int64_t bytes = 4 * CapacityEntries(spec.capacity, num_sm);
    MLASIM_ASSIGN_OR_RETURN(info->*spec.offset,
                            int_alloc->Allocate(spec.region, bytes, kRegionAlignment));
  }
  const int64_t partial_rows = 2 * int64_t{num_clusters} * cluster_tile_q;
  MLASIM_ASSIGN_OR_RETURN(
      info->partial_o_offset,
      float_alloc->Allocate(kPartialORegion, partial_rows * kPartialOElementBytes * head_dim_o,
                            kRegionAlignment));
  MLASIM_ASSIGN_OR_RETURN(
      info->partial_lse_offset,
      float_alloc->Allocate(kPartialLseRegion, partial_rows * 4, kRegionAlignment));
  return OkStatus();
}

void ReportOverflows(int32_t num_sm, MLAPlanResult* p) {
  for (const IntListSpec& spec : kIntLists) {
    const int64_t entries = static_cast<int64_t>((p->*spec.list).size());
    const int64_t capacity = CapacityEntries(spec.capacity, num_sm);
    if (entries > capacity) p->overflows.push_back({spec.region, entries, capacity});
  }
}

}  // namespace

Status ValidateMLAPlanInput(const MLAPlanInput& in) {
  MLASIM_RETURN_IF_ERROR(ValidateLengths(in));
  MLASIM_RETURN_IF_ERROR(ValidateArrays(in));
  return ValidateScalars(in);
}

StatusOr<MLAPlanResult> MLAPlan(const MLAPlanInput& in) {
  MLASIM_RETURN_IF_ERROR(ValidateMLAPlanInput(in));
  MLAPlanResult p;
  MLASIM_RETURN_IF_ERROR(DecideClusters(in, &p));
  MLASIM_RETURN_IF_ERROR(DecideKvLenLimit(in, &p));
  Schedule(in, &p);
  RegionAllocator int_alloc = RegionAllocator::Real(in.int_workspace_bytes);
  RegionAllocator float_alloc = RegionAllocator::Real(in.float_workspace_bytes);
  MLASIM_RETURN_IF_ERROR(Layout(in.num_sm, p.num_clusters, p.cluster_tile_q, in.head_dim_o,
                                &int_alloc, &float_alloc, &p.info));
  p.int_regions = int_alloc.regions();
  p.float_regions = float_alloc.regions();
  p.int_allocated_bytes = int_alloc.allocated_bytes();
  p.float_allocated_bytes = float_alloc.allocated_bytes();
  ReportOverflows(in.num_sm, &p);
  return p;
}

StatusOr<MLAWorkspaceSizes> MLAPlanWorkspaceSize(int32_t num_sm, int32_t cluster_size,
                                                 int32_t head_dim_o) {
  if (num_sm < 1 || num_sm > kMaxNumSm)
    return InvalidArgumentError("num_sm",
                                fmt::format("is {}, must be in [1, {}]", num_sm, kMaxNumSm));
  if (cluster_size != 1 && cluster_size != 2)
    return InvalidArgumentError("cluster_size", fmt::format("is {}, must be 1 or 2", cluster_size));
  if (head_dim_o < 1 || head_dim_o > kMaxHeadDimO)
    return InvalidArgumentError("head_dim_o",
                                fmt::format("is {}, must be in [1, {}]", head_dim_o, kMaxHeadDimO));
  MLAWorkspaceSizes z;
  const int32_t num_clusters = num_sm / cluster_size;
  z.info.num_blks_x = cluster_size;
  z.info.num_blks_y = num_clusters;
  RegionAllocator int_alloc = RegionAllocator::Counting();
  RegionAllocator float_alloc = RegionAllocator::Counting();
  MLASIM_RETURN_IF_ERROR(Layout(num_sm, num_clusters, cluster_size * kCtaTileQ, head_dim_o,
                                &int_alloc, &float_alloc, &z.info));
  z.int_bytes = int_alloc.allocated_bytes();
  z.float_bytes = float_alloc.allocated_bytes();
  z.int_regions = int_alloc.regions();
  z.float_regions = float_alloc.regions();
  return z;
}

StatusOr<MLAWorkspaceSizes> MLAPlanWorkspaceSize(const MLAPlanInput& in) {
  MLASIM_RETURN_IF_ERROR(ValidateMLAPlanInput(in));
  MLAPlanResult p;
  MLASIM_RETURN_IF_ERROR(DecideClusters(in, &p));
  return MLAPlanWorkspaceSize(in.num_sm, p.cluster_size, in.head_dim_o);
}

IntWorkspaceImage RenderIntWorkspace(const MLAPlanResult& plan, int64_t buffer_bytes) {
  MLASIM_ASSERT(buffer_bytes >= 0 && buffer_bytes <= (int64_t{1} << 32),
                fmt::format("image of {} bytes", buffer_bytes));
  IntWorkspaceImage image;
  image.bytes.assign(buffer_bytes, 0);
  for (const IntListSpec& spec : kIntLists) {
    const std::vector<int32_t>& list = plan.*spec.list;
    int64_t at = plan.info.*spec.offset;
    for (int32_t v : list) {
      const uint32_t u = static_cast<uint32_t>(v);
      for (int k = 0; k < 4; ++k, ++at) {
        if (at < buffer_bytes) {
          image.bytes[at] = static_cast<uint8_t>(u >> (8 * k));
        } else {
          ++image.bytes_written_past_buffer;
        }
      }
    }
  }
  return image;
}

}  // namespace mlasim::ref::flashinfer
