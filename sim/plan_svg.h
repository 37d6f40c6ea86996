// File: sim/plan_svg.h
//
// The plan timeline picture (docs/pictures.md): one row per cluster (a persistent workgroup of
// aiter's MLA decode, aiter-mla-metadata.md §2-§3), its work items in the order the cluster runs
// them, each as long as its KV range (kv_end - kv_start, in pages). Pieces of one split q tile
// share a colour and a bracket in the "reduce" lane (the tile mla_reduce_v1 merges them into,
// from reduce_indptr / reduce_partial_map); zero-KV items are hatched boxes of fixed width;
// marked items (a replay's out-of-bounds work items) are red and labelled, items of other findings
// outlined orange and labelled. Runs of clusters
// without work collapse into one thin row. Used by `mlasim plan --svg` and the replay page.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ref/metadata.h"

namespace mlasim::sim {

// A work item a finding names, with the text that explains it ("call 6 reads q rows 156..159").
// Out-of-bounds findings (rows outside a buffer) draw the item red; other findings (an invalid
// plan, a stale read, ...) draw an orange outline.
struct PlanMark {
  int32_t work = 0;  // work_info row
  std::string label;
  bool out_of_bounds = true;
};

struct PlanPicture {
  std::string title;                          // first line ("plan sparse_mtp_plan")
  std::vector<std::string> notes;             // lines under it (who consumes the plan)
  const ref::PlanRequest* request = nullptr;  // the request the plan serves (required)
  const ref::Plan* plan = nullptr;            // required
  int32_t real_requests = -1;  // requests >= this are padding (lighter fill); -1: all real
  std::vector<PlanMark> marks;
  // Draw only these clusters (inclusive ranges, ascending); each run left out is one dashed
  // `elided` row. Empty: every cluster. The detail view of a replay (ClustersAround).
  std::vector<std::pair<int32_t, int32_t>> only_clusters;
};

// SVG content (elements, without the <svg> element) and its size in pixels.
struct SvgPicture {
  std::string content;
  double width = 0, height = 0;
};

// Drawing bounds: at most this many work items and cluster rows (after collapsing runs of empty
// clusters) are drawn; the picture says how many more there were. Plans of real aiter calls are
// far below both (the founding case: 378 items on 256 clusters).
inline constexpr int32_t kMaxDrawnWorks = 20000;
inline constexpr int32_t kMaxDrawnRows = 1024;

// The timeline of p.plan. Elements carry classes tests and readers can count: every drawn work
// item is one `<rect class="work ...">` (plus "split", "zero-kv", "padding", "undefined", and
// "oob" or "finding" for a marked item),
// each collapsed run one `<rect class="empty-run">`, each reduce bracket one `<g class="reduce">`.
// Deterministic bytes. An item whose fields are undefined (ref::Cell::kUndefined) is drawn as a
// fixed-width grey box. MLASIM_ASSERTs that request and plan are set.
SvgPicture PlanTimeline(const PlanPicture& p);

// The clusters running any of `works`, each widened by `margin` clusters on both sides, merged
// into ascending inclusive ranges (for PlanPicture::only_clusters). Works no cluster runs are
// ignored.
std::vector<std::pair<int32_t, int32_t>> ClustersAround(const ref::Plan& p,
                                                        const std::vector<int32_t>& works,
                                                        int32_t margin);

// `<svg ...>` + PlanTimeline + `</svg>`, for HTML pages.
std::string PlanTimelineInline(const PlanPicture& p);

// A standalone SVG file of the timeline (`mlasim plan --svg FILE`).
std::string PlanTimelineFile(const PlanPicture& p);

}  // namespace mlasim::sim
