// Scenario builders for simulator tests.
#pragma once

#include <string>
#include <vector>

#include "sim/engine.h"
#include "sim/replay.h"

namespace mlasim::sim::test {

// The worked example of atom-mtp-flow.md §6: K = 3, capture list [1,2,4,8,16,...], B = 5 -> R = 8,
// L = [100, 3000, 50, 2100, 7], r = [0, 3, 1, 2, 0].
inline Scenario WorkedExample(bool sparse, const std::string& profile) {
  Scenario s;
  s.name = sparse ? "worked-example-sparse" : "worked-example-dense";
  s.model.heads = sparse ? 64 : 128;
  s.parallel.tp = sparse ? 4 : 8;
  s.model.sparse = sparse;
  s.model.topk = 2048;
  s.model.kv_dtype = sparse ? ref::DType::kFp8 : ref::DType::kBf16;
  s.mtp_k = 3;
  const int32_t L[] = {100, 3000, 50, 2100, 7};
  const int32_t r[] = {0, 3, 1, 2, 0};
  for (int i = 0; i < 5; ++i) s.requests.push_back({L[i], 0, r[i], {}});
  s.graph.capture_sizes = {1, 2, 4, 8, 16, 32, 48, 64, 128, 256, 512};
  s.target = ref::Arch::kGfx950;
  s.engine = *GetEngineProfile(profile, "engine");
  // The spec's table assumes every padded token gets a work item: the serial planner. aiter's
  // default (parallel) planner may drop trailing zero-KV pads (tested separately).
  s.serial_planner = true;
  return s;
}

inline const Call* FindCall(const Trace& t, const std::string& step, const std::string& name) {
  for (const Call& c : t.calls)
    if (c.step == step && c.name == name) return &c;
  return nullptr;
}

inline std::vector<int32_t> Lengths(const std::vector<int32_t>& indptr) {
  std::vector<int32_t> out;
  for (size_t i = 1; i < indptr.size(); ++i) out.push_back(indptr[i] - indptr[i - 1]);
  return out;
}

}  // namespace mlasim::sim::test
