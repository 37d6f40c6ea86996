#include "ref/sizing.h"

#include <algorithm>
#include <string>

namespace mlasim::ref {
namespace {

int32_t CeilDiv(int32_t a, int32_t b) {
  return (a + b - 1) / b;
}

// Max q tiles per request as the sizing helper over-estimates them (§2, overrides A, B, C).
int32_t MaxQoTilesPerBatch(const RevisionRules& rules, const ShapeKey& key) {
  const int32_t packed = key.heads * key.seqlen_qo;
  if (AnyRuleMatches(rules.sizing_pack64, key))
    return key.heads * 2 > 64 ? key.seqlen_qo : CeilDiv(packed, 64);
  if (AnyRuleMatches(rules.sizing_pack128, key)) return CeilDiv(packed, 128);
  if (AnyRuleMatches(rules.sizing_wide128, key))
    return key.heads * 2 > 128 ? key.seqlen_qo : CeilDiv(packed, 128);
  return CeilDiv(packed, 16);
}

}  // namespace

MetadataSizes PartialMapOnePerTile(MetadataSizes sizes) {
  sizes.reduce_partial_map = sizes.tile_cnt;
  return sizes;
}

int32_t EffectiveCuCount(const PlanRequest& request) {
  return request.cu_count > 0 ? request.cu_count : GetTargetProfile(request.target).cu_count;
}

StatusOr<MetadataSizes> GetMlaMetadataInfoV1(const PlanRequest& request, int32_t batch_size) {
  const RevisionRules& rules = GetRevisionRules(request.revision);
  const int32_t heads = request.heads_per_head_k * request.num_heads_k;
  if (heads <= 0 || heads % rules.info_heads_multiple != 0) {
    return InvalidArgumentError(
        "heads_per_head_k",
        "get_mla_metadata_info_v1 requires the q head count to be a multiple of " +
            std::to_string(rules.info_heads_multiple) + " (got " + std::to_string(heads) + ")");
  }
  if (request.qlen < 1) return InvalidArgumentError("qlen", "tokens per request must be >= 1");
  if (batch_size < 0) return InvalidArgumentError("batch_size", "must be >= 0");

  const bool is_sparse = request.topk >= 0;
  // Occupancy is 2 only for the experimental HK m16x4 kernel, which is not modelled.
  const int32_t occupancy = 1;
  const int32_t cu = EffectiveCuCount(request);
  const int32_t max_splits = rules.sizing_has_occupancy ? cu * occupancy : cu;
  const int32_t eff_sq = is_sparse ? 1 : request.qlen;
  const ShapeKey key{GetTargetProfile(request.target).rules_arch, heads, eff_sq, request.q_dtype,
                     request.kv_dtype};
  const int32_t tpb = MaxQoTilesPerBatch(rules, key);

  const int64_t b = is_sparse ? int64_t{batch_size} * request.qlen : batch_size;
  const int64_t tile_cnt = b * tpb;
  const int64_t max_work = (b + max_splits - 1) * tpb;
  int64_t max_split_tiles = std::min<int64_t>(b + max_splits - 1, 2 * (max_splits - 1)) * tpb;
  if (rules.sizing_has_max_split_per_batch && request.max_split_per_batch > 0) {
    const int64_t per_tile_cap =
        std::min<int64_t>(max_splits, int64_t{request.max_split_per_batch} * b);
    max_split_tiles = std::max(max_split_tiles, tile_cnt + per_tile_cap);
  }
  if (max_work > INT32_MAX / kWorkInfoWidth || tile_cnt > INT32_MAX / kReduceFinalMapWidth - 1)
    return InvalidArgumentError("batch_size", "metadata buffers would exceed 2^31 elements");

  MetadataSizes s;
  s.work_metadata_ptrs = 2;
  s.work_indptr = max_splits + 1;
  s.work_info_rows = static_cast<int32_t>(max_work);
  s.reduce_indptr = static_cast<int32_t>(tile_cnt + 1);
  s.reduce_final_map_rows = static_cast<int32_t>(tile_cnt);
  s.reduce_partial_map = static_cast<int32_t>(max_split_tiles);
  s.max_splits = max_splits;
  s.max_qo_tiles_per_batch = tpb;
  s.tile_cnt = static_cast<int32_t>(tile_cnt);
  return s;
}

}  // namespace mlasim::ref
