// File: ref/plan_buffers.h
//
// The plan buffers as ONE table (issue 10 §6): the six buffers aiter's get_mla_metadata_info_v1
// sizes and get_mla_metadata_v1 fills, with their row width (in elements of their dtype), dtype
// and the call that writes them, plus the named fields of a work_info row (MlaWorkInfo) and of a
// reduce_final_map row (MlaPartialTileInfo). Every reader (planner, checker, decode_update,
// outputs, golden reader, request JSON, simulator, kernels) takes widths and field indices from
// here: no bare `8` for a work_info row.
//
// Sources: aiter-mla-metadata.md §2 (sizes), §3.2 (MlaWorkInfo fields); aiter csrc/include/mla.h
// (MlaWorkInfo: 8 dwords, MlaPartialTileInfo: 2 dwords). Plain constants only, so device code
// (kernels/*.hip) can include it.
#pragma once

#include <cstdint>

namespace mlasim::ref {

enum class PlanBufferId : uint8_t {
  kWorkMetadataPtrs,
  kWorkIndptr,
  kWorkInfo,
  kReduceIndptr,
  kReduceFinalMap,
  kReducePartialMap,
};
constexpr int kPlanBufferCount = 6;

// Row widths in elements.
constexpr int32_t kWorkInfoWidth = 8;        // MlaWorkInfo: 8 int32
constexpr int32_t kReduceFinalMapWidth = 2;  // MlaPartialTileInfo: (qo_start, qo_end)

// work_info row fields (MlaWorkInfo, §3.2).
enum WorkField : int32_t {
  kBatchIdx = 0,
  kPartialQoLoc = 1,  // first partial row (units of q rows), -1 = writes final rows
  kQoStart = 2,
  kQoEnd = 3,
  kKvStart = 4,  // planner KV space, pages (tokens at page size 1)
  kKvEnd = 5,
  kKvOffset = 6,  // distance from kv_end to the request's end
  kPad = 7,
};
constexpr int32_t kWorkFieldCount = kWorkInfoWidth;

// reduce_final_map row fields (MlaPartialTileInfo).
enum FinalMapField : int32_t {
  kFinalQoStart = 0,
  kFinalQoEnd = 1,
};

enum class PlanDType : uint8_t { kInt32, kUint64 };

struct PlanBufferSpec {
  PlanBufferId id;
  const char* name;   // aiter's name, also the .npy file stem and the simulator's buffer name
  int32_t row_width;  // elements per row; 1 = a flat array
  PlanDType dtype;
  const char* dtype_name;  // "int32" / "uint64"
  const char* npy_descr;   // numpy dtype string
  int32_t element_bytes;
  const char* rows;        // what get_mla_metadata_info_v1 sizes its rows to (§2)
  const char* written_by;  // the owner: which calls write it
};

// In PlanBufferId order.
inline constexpr PlanBufferSpec kPlanBuffers[kPlanBufferCount] = {
    {PlanBufferId::kWorkMetadataPtrs, "work_metadata_ptrs", 1, PlanDType::kUint64, "uint64", "<u8",
     8, "2", "get_mla_metadata_v1: &work_indptr, &work_info (device pointers)"},
    {PlanBufferId::kWorkIndptr, "work_indptr", 1, PlanDType::kInt32, "int32", "<i4", 4,
     "max_splits + 1",
     "get_mla_metadata_v1: [0, num_clusters]; decode_update reads its last entry"},
    {PlanBufferId::kWorkInfo, "work_info", kWorkInfoWidth, PlanDType::kInt32, "int32", "<i4", 4,
     "(B + max_splits - 1) x tiles per batch",
     "get_mla_metadata_v1: rows [0, num_works); decode_update rewrites them in place"},
    {PlanBufferId::kReduceIndptr, "reduce_indptr", 1, PlanDType::kInt32, "int32", "<i4", 4,
     "tile_cnt + 1", "get_mla_metadata_v1: every entry"},
    {PlanBufferId::kReduceFinalMap, "reduce_final_map", kReduceFinalMapWidth, PlanDType::kInt32,
     "int32", "<i4", 4, "tile_cnt",
     "get_mla_metadata_v1: rows of split tiles; decode_update may rewrite them"},
    {PlanBufferId::kReducePartialMap, "reduce_partial_map", 1, PlanDType::kInt32, "int32", "<i4", 4,
     "max_split_tiles",
     "get_mla_metadata_v1: one entry per split piece; decode_update may rewrite them"},
};

constexpr const PlanBufferSpec& GetPlanBufferSpec(PlanBufferId id) {
  return kPlanBuffers[static_cast<int>(id)];
}

// The five int32 buffers a Plan holds as Int32Buffer, in PlanBufferId order.
inline constexpr PlanBufferId kInt32PlanBuffers[5] = {
    PlanBufferId::kWorkIndptr, PlanBufferId::kWorkInfo, PlanBufferId::kReduceIndptr,
    PlanBufferId::kReduceFinalMap, PlanBufferId::kReducePartialMap};

// Field names of a work_info row ("batch_idx", ...), "?" outside 0..7.
const char* WorkFieldName(int32_t field);

}  // namespace mlasim::ref
