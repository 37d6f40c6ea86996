// File: ref/sizing.h
//
// get_mla_metadata_info_v1: the element counts of the six metadata buffers that a caller
// allocates before planning (aiter-mla-metadata.md §2; fast mode, no intra-batch mode,
// AITER_ENABLE_EXPERIMENTAL unset, so occupancy 1).
#pragma once

#include "ref/metadata.h"

namespace mlasim::ref {

// Sizes for `batch_size` requests of `request.qlen` tokens (sparse: tokens are planned one per
// virtual batch, so B = batch_size * qlen). Heads = num_heads_k * heads_per_head_k.
// batch_size: requests (>= 0). cu_count comes from request.cu_count or the target profile.
// Errors: InvalidArgument("heads_per_head_k") when heads % 8 != 0 (2026-03: % 16), mirroring
// the helper's `assert num_head_qo % 8 == 0`; InvalidArgument for qlen < 1 or a negative batch.
StatusOr<MetadataSizes> GetMlaMetadataInfoV1(const PlanRequest& request, int32_t batch_size);

// `sizes` with reduce_partial_map sized at one entry per q tile (tile_cnt): a sizing that forgets
// that split tiles add partial entries (the inverse of aiter #3855). The one implementation of
// that bug, switched on by the planner mutant kUndersizedPartialMap and by the engine table's
// partial_map_per_tile variable (sim/engines/atom.json).
MetadataSizes PartialMapOnePerTile(MetadataSizes sizes);

// CU count the request plans for: request.cu_count if > 0, else the target profile's.
int32_t EffectiveCuCount(const PlanRequest& request);

}  // namespace mlasim::ref
