// Helpers for the picture tests (tests/pictures/): counting elements in the written markup, a
// synthetic plan, and a canned `replay --gpu --json` "gpu" object.
#pragma once

#include <cstdint>
#include <regex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "ref/metadata.h"

namespace mlasim::test {

// Non-overlapping occurrences of `needle` in `s`.
inline int64_t Count(const std::string& s, const std::string& needle) {
  int64_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + needle.size()))
    ++n;
  return n;
}

// The work indices of the `<rect class="work ...">` elements whose class list holds `cls` (""
// for every work rect), read from their hover titles ("work 374: ...").
inline std::multiset<int32_t> WorkRects(const std::string& svg, const std::string& cls = "") {
  std::multiset<int32_t> out;
  static const std::regex re("<rect [^>]*class=\"(work[^\"]*)\"[^>]*><title>work (\\d+):");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    const std::string classes = " " + (*it)[1].str() + " ";
    if (cls.empty() || classes.find(" " + cls + " ") != std::string::npos)
      out.insert(std::stoi((*it)[2].str()));
  }
  return out;
}

// A plan of `clusters` clusters, `per_cluster` unsplit work items each, item w covering q row w
// and KV [100 w, 100 w + 100) (zero KV for every `zero_every`-th item when > 0).
inline ref::Plan SyntheticPlan(int32_t clusters, int32_t per_cluster, int32_t zero_every = 0) {
  ref::Plan p;
  const int32_t works = clusters * per_cluster;
  p.derived.num_clusters = clusters;
  p.derived.num_works = works;
  p.work_indptr.Reset(clusters + 1, 1);
  for (int32_t c = 0; c <= clusters; ++c) p.work_indptr.Store(c, c * per_cluster);
  p.work_info.Reset(works * 8, 8);
  for (int32_t w = 0; w < works; ++w) {
    const bool zero = zero_every > 0 && w % zero_every == 0;
    const int32_t f[8] = {w, -1, w, w + 1, 100 * w, zero ? 100 * w : 100 * w + 100, 0, 0};
    for (int k = 0; k < 8; ++k) p.work_info.Store(int64_t{w} * 8 + k, f[k]);
  }
  p.reduce_indptr.Reset(1, 1);
  p.reduce_indptr.Store(0, 0);
  return p;
}

// A `replay --gpu guard --json` "gpu" object in the format of tools/mlasim/cmd_replay.cpp's
// GpuJson, written by hand (not a device run) after the founding case's guard run that
// docs/gpu-results.md describes: the draft_step_0 call reads q and writes o rows 156..159
// past their 156 rows, both on the GPU and in the simulator, and faults in both guarded runs.
inline nlohmann::json CannedGpuReport() {
  using nlohmann::json;
  auto numerics = [](double o_abs) {
    json cmp = {{"max_abs", o_abs},    {"cos_diff", 1e-6},
                {"elements", 1000},    {"tolerance_violations", 0},
                {"nan_mismatches", 0}, {"inf_mismatches", 0},
                {"passed", true},      {"atol", 0.0156},
                {"rtol", 0.0156}};
    return json{{"rows_compared", 156},
                {"poisoned_pairs_skipped", 0},
                {"undefined", false},
                {"o", cmp},
                {"lse", cmp},
                {"passed", true},
                {"truth", {{"o", cmp}, {"lse", cmp}, {"passed", true}}}};
  };
  auto range = [](int64_t a, int64_t b) { return json{{"first", a}, {"last", b}}; };
  auto call = [&](int idx, const char* step, int q_rows, int plan_rows, bool past) {
    json c = {{"index", idx},
              {"step", step},
              {"call", "sparse_decode"},
              {"run", true},
              {"agree", true},
              {"q_rows", q_rows},
              {"plan_rows", plan_rows},
              {"kernel", "asm"},
              {"numerics", numerics(0.0039)}};
    const json r = past ? range(q_rows, plan_rows - 1) : json();
    c["q_read_past_end"] = {
        {"gpu", r}, {"simulator", r}, {"agree", true}, {"access_log", range(0, plan_rows - 1)}};
    c["o_written_past_end"] = {{"gpu", r}, {"lse_gpu", r}, {"simulator", r}, {"agree", true}};
    c["unpredicted_tails"] = json::array();
    c["guard"] = json::array();
    for (const char* b : {"q", "o"})
      c["guard"].push_back({{"buffer", b},
                            {"faulted", past},
                            {"child_failed", false},
                            {"detail", past ? "cudaErrorIllegalAddress" : "ran clean"},
                            {"simulator", r},
                            {"agree", true}});
    return c;
  };
  json plans = json::array();
  for (const char* p : {"sparse_mtp_plan", "draft_sparse_plan", "draft_sparse_plan"})
    plans.push_back({{"plan", p},
                     {"compared", true},
                     {"kernel", "parallel"},
                     {"mismatches", 0},
                     {"first_mismatch", nullptr}});
  json calls = json::array(
      {call(3, "verify", 160, 160, false), call(6, "draft_step_0", 156, 160, true),
       call(10, "draft_step_1", 40, 40, false), call(14, "draft_step_2", 40, 40, false)});
  return {{"device", "NVIDIA H200 (canned report, not a device run)"},
          {"mode", "guard"},
          {"plans", plans},
          {"calls", calls},
          {"calls_run", 4},
          {"verdict", "agrees"}};
}

}  // namespace mlasim::test
