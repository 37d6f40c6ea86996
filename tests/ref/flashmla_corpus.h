// File: tests/ref/flashmla_corpus.h
//
// The FlashMLA scheduler golden corpus: random scheduler launches (inputs in
// tests/data/flashmla-sched-inputs.jsonl.gz), their JSON form, and the outputs FlashMLA's own
// scheduler kernels write on the H200 (tests/data/flashmla-sched.jsonl.gz, produced by
// tools/gpu/flashmla_corpus.sh; see docs/planners.md). A record holds one launch shape; dense
// records run at both revisions, sparse ones at 9241ae3 only.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ref/flashmla/sched.h"

namespace mlasim::test {

struct FlashMlaCase {
  std::string kind;  // "dense", "dense-padded", "sparse", "sparse-lengths", "sparse-extra", ...
  // The launch; `input.revision` is ignored: Revisions() says which ones run.
  ref::flashmla::SchedInput input;
  std::vector<ref::flashmla::Revision> Revisions() const;
};

// Case `index` of the stream `seed`: batch sizes 1..512 (a few up to 4095), num_sm_parts from
// FlashMLA's own sizing on SM counts 1..160 (dense: s_q 1..4, h_q 16..128; sparse sm90/sm100
// shapes), zero lengths, graph-padded batches with zero-length pads, lengths up to 128K,
// sparse topk with and without per-request lengths and extra caches (extra_topk -1 included).
FlashMlaCase RandomFlashMlaCase(uint64_t seed, int64_t index);

nlohmann::json CaseToJson(const FlashMlaCase& c);
StatusOr<FlashMlaCase> FlashMlaCaseFromJson(const nlohmann::json& j);

// What one revision's scheduler wrote: the written words of each row and num_splits.
struct FlashMlaOutcome {
  std::vector<std::vector<int32_t>> rows;  // [num_sm_parts][WrittenRowWords(revision)]
  std::vector<int32_t> num_splits;         // [b + 1]
  bool operator==(const FlashMlaOutcome& o) const {
    return rows == o.rows && num_splits == o.num_splits;
  }
};
using FlashMlaOutcomes = std::map<std::string, FlashMlaOutcome>;  // by RevisionName

// The reference's outcomes for every revision the case runs at (Status error if one refuses).
StatusOr<FlashMlaOutcomes> ReferenceOutcomes(const FlashMlaCase& c);
nlohmann::json OutcomesToJson(const FlashMlaOutcomes& o);
StatusOr<FlashMlaOutcomes> OutcomesFromJson(const nlohmann::json& j);

}  // namespace mlasim::test
