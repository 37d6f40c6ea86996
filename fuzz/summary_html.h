// File: fuzz/summary_html.h
//
// A campaign summary as one self-contained HTML page (`mlasim fuzz --html FILE`,
// docs/pictures.md): the campaign (seed, shard, profiles, budgets, cases, speed), findings over
// time (one row per signature, a dot at the seed index where the campaign first saw it, and the
// cumulative count of findings against the seed index), the findings table and the coverage
// counters (cases of this run per feature, grouped by the feature's prefix). Inline SVG, no
// script, no external asset, every string escaped (sim/html.h). Pure: the same summary gives the
// same bytes.
#pragma once

#include <cstdint>
#include <string>

#include "fuzz/campaign.h"

namespace mlasim::fuzz {

// Drawing bound: at most this many signature rows in the findings-over-time picture (all are
// listed in the table below it).
inline constexpr int32_t kMaxDrawnFindings = 400;

// `seed_text` is the seed as the user typed it (shown beside the numeric seed when it differs).
std::string CampaignHtml(const CampaignOptions& o, const CampaignSummary& s,
                         const std::string& seed_text = "");

// The findings-over-time picture alone (<svg class="findings-time">); "" without findings. Dots
// carry class "finding" (new) or "finding earlier" (already in --out); findings whose seed index
// is unknown are not drawn.
std::string FindingsTimeSvg(const CampaignOptions& o, const CampaignSummary& s);
// The coverage counters (<svg class="coverage">, one `<rect class="cov">` per feature); "" if none.
std::string CoverageSvg(const CampaignSummary& s);

}  // namespace mlasim::fuzz
