#include "tests/ref/flashmla_corpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

#include "ref/flashmla/sizing.h"
#include "ref/numerics.h"

namespace mlasim::test {
namespace {

namespace fm = ref::flashmla;
using ref::SplitMix64;

int32_t Range(SplitMix64& r, int32_t lo, int32_t hi) {
  return lo + static_cast<int32_t>(r.Below(static_cast<uint64_t>(hi - lo) + 1));
}
bool Chance(SplitMix64& r, int percent) {
  return r.Below(100) < static_cast<uint64_t>(percent);
}
int32_t Pick(SplitMix64& r, std::initializer_list<int32_t> v) {
  return *(v.begin() + r.Below(v.size()));
}
int32_t RandomNumSms(SplitMix64& r) {
  return Chance(r, 60) ? Pick(r, {132, 114, 78, 148, 108, 66, 16}) : Range(r, 1, 160);
}
int32_t RandomSeqlen(SplitMix64& r) {
  if (Chance(r, 10)) return 0;
  if (Chance(r, 10)) return Pick(r, {1, 63, 64, 65, 127, 128, 129, 4096});
  return Range(r, 1, 1 << Range(r, 6, 17));  // up to 128K tokens
}

std::string RandomKind(SplitMix64& r) {
  const uint64_t x = r.Below(100);
  if (x < 40) return "dense";
  if (x < 55) return "dense-padded";
  if (x < 60) return "dense-large-batch";
  if (x < 75) return "sparse";
  if (x < 85) return "sparse-lengths";
  if (x < 95) return "sparse-extra";
  if (x < 98) return "sparse-sm100";
  return "sparse-extra-minus-one";
}

void FillDense(SplitMix64& r, const std::string& kind, FlashMlaCase* c) {
  fm::DenseDecodeShape shape;
  shape.batch_size =
      kind == "dense-large-batch" ? Range(r, 513, 4095) : Range(r, 1, 1 << Range(r, 0, 9));
  shape.seqlen_q = Chance(r, 50) ? 1 : Range(r, 2, 4);
  shape.num_heads_q = Pick(r, {16, 32, 64, 128});
  shape.num_sms = RandomNumSms(r);
  const auto sizing = fm::SizeDenseDecode(fm::Revision::k9241ae3, shape);
  MLASIM_ASSERT(sizing.ok(), sizing.status().ToString());
  std::vector<int32_t> seqlens;
  for (int32_t i = 0; i < shape.batch_size; ++i) seqlens.push_back(RandomSeqlen(r));
  if (kind == "dense-padded") {  // CUDA-graph padding to a captured size with zero-length pads
    const int32_t graph =
        std::max(shape.batch_size, Pick(r, {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}));
    seqlens.resize(graph, 0);
  }
  c->input = fm::DenseSchedInput(*sizing, std::move(seqlens));
}

void FillSparse(SplitMix64& r, const std::string& kind, FlashMlaCase* c) {
  fm::SparseDecodeShape shape;
  shape.arch = kind == "sparse-sm100" ? fm::Arch::kSm100f : fm::Arch::kSm90a;
  shape.batch_size = Range(r, 1, 1 << Range(r, 0, 9));
  shape.seqlen_q = Chance(r, 60) ? 1 : Range(r, 2, 4);
  shape.num_heads_q = Pick(r, {64, 128});
  const bool extra = kind == "sparse-extra" || kind == "sparse-extra-minus-one";
  shape.head_size_qk = extra || Chance(r, 30) ? 512 : 576;
  shape.topk = Pick(r, {128, 512, 1024, 2048});
  shape.extra_topk = kind == "sparse-extra" ? Pick(r, {64, 128, 512}) : 0;
  shape.num_sms = RandomNumSms(r);
  const auto sizing = fm::SizeSparseDecode(shape);
  MLASIM_ASSERT(sizing.ok(), sizing.status().ToString());
  std::vector<int32_t> topk_length, extra_length;
  if (kind != "sparse" && Chance(r, 70))
    for (int32_t i = 0; i < shape.batch_size; ++i)
      topk_length.push_back(Chance(r, 10) ? 0 : Range(r, 1, shape.topk));
  if (kind == "sparse-extra" && Chance(r, 50))
    for (int32_t i = 0; i < shape.batch_size; ++i)
      extra_length.push_back(Range(r, 0, shape.extra_topk));
  c->input = fm::SparseSchedInput(*sizing, shape.batch_size, std::move(topk_length),
                                  std::move(extra_length));
  if (kind == "sparse-extra-minus-one") c->input.extra_topk = -1;  // params.h's "disabled"
}

template <typename T>
StatusOr<T> Get(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return InvalidArgumentError(key, "missing");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(key, e.what());
  }
}

}  // namespace

std::vector<fm::Revision> FlashMlaCase::Revisions() const {
  if (input.topk == -1 && input.batch_size < fm::kMaxBatchSize414a2f3)
    return {fm::Revision::k414a2f3, fm::Revision::k9241ae3};
  return {fm::Revision::k9241ae3};
}

FlashMlaCase RandomFlashMlaCase(uint64_t seed, int64_t index) {
  SplitMix64 r = SplitMix64::Stream(seed, static_cast<uint64_t>(index));
  FlashMlaCase c;
  c.kind = RandomKind(r);
  if (c.kind.rfind("dense", 0) == 0) {
    FillDense(r, c.kind, &c);
  } else {
    FillSparse(r, c.kind, &c);
  }
  return c;
}

nlohmann::json CaseToJson(const FlashMlaCase& c) {
  const auto& in = c.input;
  return {{"kind", c.kind},
          {"batch_size", in.batch_size},
          {"num_sm_parts", in.num_sm_parts},
          {"block_size_n", in.block_size_n},
          {"fixed_overhead_num_blocks", in.fixed_overhead_num_blocks},
          {"seqlens_k", in.seqlens_k},
          {"topk", in.topk},
          {"extra_topk", in.extra_topk},
          {"topk_length", in.topk_length},
          {"extra_topk_length", in.extra_topk_length}};
}

StatusOr<FlashMlaCase> FlashMlaCaseFromJson(const nlohmann::json& j) {
  FlashMlaCase c;
  auto& in = c.input;
  MLASIM_ASSIGN_OR_RETURN(c.kind, Get<std::string>(j, "kind"));
  MLASIM_ASSIGN_OR_RETURN(in.batch_size, Get<int32_t>(j, "batch_size"));
  MLASIM_ASSIGN_OR_RETURN(in.num_sm_parts, Get<int32_t>(j, "num_sm_parts"));
  MLASIM_ASSIGN_OR_RETURN(in.block_size_n, Get<int32_t>(j, "block_size_n"));
  MLASIM_ASSIGN_OR_RETURN(in.fixed_overhead_num_blocks,
                          Get<int32_t>(j, "fixed_overhead_num_blocks"));
  MLASIM_ASSIGN_OR_RETURN(in.seqlens_k, Get<std::vector<int32_t>>(j, "seqlens_k"));
  MLASIM_ASSIGN_OR_RETURN(in.topk, Get<int32_t>(j, "topk"));
  MLASIM_ASSIGN_OR_RETURN(in.extra_topk, Get<int32_t>(j, "extra_topk"));
  MLASIM_ASSIGN_OR_RETURN(in.topk_length, Get<std::vector<int32_t>>(j, "topk_length"));
  MLASIM_ASSIGN_OR_RETURN(in.extra_topk_length, Get<std::vector<int32_t>>(j, "extra_topk_length"));
  return c;
}

StatusOr<FlashMlaOutcomes> ReferenceOutcomes(const FlashMlaCase& c) {
  FlashMlaOutcomes out;
  for (fm::Revision rev : c.Revisions()) {
    fm::SchedInput in = c.input;
    in.revision = rev;
    MLASIM_ASSIGN_OR_RETURN(const fm::SchedMeta meta, fm::GetDecodingSchedMeta(in));
    FlashMlaOutcome& o = out[fm::RevisionName(rev)];
    for (const fm::SchedRow& row : meta.rows) o.rows.push_back(fm::RowWords(rev, row));
    o.num_splits = meta.num_splits;
  }
  return out;
}

nlohmann::json OutcomesToJson(const FlashMlaOutcomes& o) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [rev, outcome] : o)
    j[rev] = {{"rows", outcome.rows}, {"num_splits", outcome.num_splits}};
  return j;
}

StatusOr<FlashMlaOutcomes> OutcomesFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgumentError("output", "not an object");
  FlashMlaOutcomes out;
  for (const auto& [rev, value] : j.items()) {
    MLASIM_RETURN_IF_ERROR(fm::ParseRevision(rev).status());
    FlashMlaOutcome& o = out[rev];
    MLASIM_ASSIGN_OR_RETURN(o.rows, Get<std::vector<std::vector<int32_t>>>(value, "rows"));
    MLASIM_ASSIGN_OR_RETURN(o.num_splits, Get<std::vector<int32_t>>(value, "num_splits"));
  }
  return out;
}

}  // namespace mlasim::test
