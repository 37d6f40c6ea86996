#include "tools/mlasim/plan_input.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ref/int_text.h"
#include "ref/limits.h"
#include "ref/planner.h"
#include "sim/scenario_json.h"
#include "tools/io/request_json.h"

namespace mlasim::cli {
namespace {

using nlohmann::json;

using ref::Limit;
using ref::LimitId;

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// A decimal integer in [lo, hi], the whole text (surrounding blanks allowed; no sign but -, no
// 0x, no exponent: "'+16' is not a decimal integer", the wording of every integer flag).
StatusOr<int64_t> ParseInt(const std::string& field, const std::string& raw, int64_t lo, int64_t hi,
                           const std::string& what = "") {
  const std::string text = Trim(raw);
  const std::string name = what.empty() ? std::string() : what + " ";
  int64_t v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(first, last, v);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != last)
    return InvalidArgumentError(field, name + "'" + raw + "' is not a decimal integer");
  if (ec == std::errc::result_out_of_range && ref::IsDecimalBeyond64Bits(text))
    return InvalidArgumentError(
        field, name + ref::Beyond64BitsText(text, std::to_string(lo) + ".." + std::to_string(hi)));
  if (ec == std::errc::result_out_of_range)
    return InvalidArgumentError(field, name + "'" + raw + "' is out of range (" +
                                           std::to_string(lo) + ".." + std::to_string(hi) + ")");
  if (v < lo)
    return InvalidArgumentError(field, name + "must be >= " + std::to_string(lo) + ", got " + text);
  if (v > hi)
    return InvalidArgumentError(
        field, name + "must be <= " + std::to_string(hi) + " (mlasim's limit), got " + text);
  return v;
}

}  // namespace

std::vector<std::string> PlanFlags::GivenFlags() const {
  std::vector<std::string> given;
  for (const CLI::Option* o : options)
    if (o->count() > 0) given.push_back(o->get_name());
  return given;
}

void AddPlanFlags(CLI::App& cmd, PlanFlags& f) {
  auto add = [&](const char* name, std::string& dest, const std::string& type, const char* help) {
    CLI::Option* o = cmd.add_option(name, dest, help)->type_name(type);
    if (!dest.empty()) o->capture_default_str();
    f.options.push_back(o);
  };
  add("--kv-lens", f.kv_lens, "LEN,...",
      "KV length in tokens of each request, comma separated (e.g. 300,40,700)");
  add("--qlen", f.qlen, "INT", "q tokens per request (MTP: > 1)");
  add("--heads", f.heads, "INT", "q heads per KV head (heads_per_head_k)");
  add("--clusters", f.clusters, "INT", "CU count (cu_count); default: the target's");
  add("--page-size", f.page_size, "INT", "tokens per KV page, a power of 2");
  add("--kv-granularity", f.kv_granularity, "INT", "split granularity in pages, a power of 2");
  // value types from the parsers' own tables (ref/target.h)
  add("--q-dtype", f.q_dtype, ref::NameChoices(ref::kDTypeNames), "q dtype");
  add("--kv-dtype", f.kv_dtype, ref::NameChoices(ref::kDTypeNames), "KV dtype");
  add("--target", f.target, ref::NameChoices(ref::kArchNames), "target GPU profile");
  add("--revision", f.revision, ref::NameChoices(ref::kRevisionNames),
      "aiter revision whose planner is modelled");
  add("--topk", f.topk, "INT",
      "sparse top-k tokens per query token (aiter-native sparse); -1 = dense");
  add("--max-split-per-batch", f.max_split_per_batch, "INT",
      "global split budget per request (-1 = none)");
  f.options.push_back(cmd.add_flag("--no-causal", f.no_causal, "is_causal = false"));
}

StatusOr<ref::PlanRequest> RequestFromFlags(const PlanFlags& f) {
  ref::PlanRequest r;
  MLASIM_ASSIGN_OR_RETURN(r.target, ref::ParseArch(Trim(f.target), "--target"));
  MLASIM_ASSIGN_OR_RETURN(r.revision, ref::ParseRevision(Trim(f.revision), "--revision"));
  MLASIM_ASSIGN_OR_RETURN(r.q_dtype, ref::ParseDType(Trim(f.q_dtype), "--q-dtype"));
  MLASIM_ASSIGN_OR_RETURN(r.kv_dtype, ref::ParseDType(Trim(f.kv_dtype), "--kv-dtype"));
  MLASIM_ASSIGN_OR_RETURN(const int64_t heads,
                          ParseInt("--heads", f.heads, 1, Limit(LimitId::kHeads)));
  r.heads_per_head_k = static_cast<int32_t>(heads);
  r.num_heads_k = 1;
  if (Trim(f.clusters).empty()) {
    r.cu_count = ref::GetTargetProfile(r.target).cu_count;
  } else {
    MLASIM_ASSIGN_OR_RETURN(const int64_t cu,
                            ParseInt("--clusters", f.clusters, 1, Limit(LimitId::kClusters)));
    r.cu_count = static_cast<int32_t>(cu);
  }
  MLASIM_ASSIGN_OR_RETURN(const int64_t page,
                          ParseInt("--page-size", f.page_size, 1, Limit(LimitId::kPageSize)));
  r.page_size = static_cast<int32_t>(page);
  MLASIM_ASSIGN_OR_RETURN(const int64_t gran, ParseInt("--kv-granularity", f.kv_granularity, 1,
                                                       Limit(LimitId::kGranularity)));
  r.kv_granularity = static_cast<int32_t>(gran);
  MLASIM_ASSIGN_OR_RETURN(const int64_t qlen, ParseInt("--qlen", f.qlen, 1, Limit(LimitId::kQlen)));
  MLASIM_ASSIGN_OR_RETURN(const int64_t topk,
                          ParseInt("--topk", f.topk, -1, Limit(LimitId::kTopk)));
  r.topk = static_cast<int32_t>(topk);
  MLASIM_ASSIGN_OR_RETURN(
      const int64_t msb,
      ParseInt("--max-split-per-batch", f.max_split_per_batch, -1, Limit(LimitId::kSplitPerBatch)));
  if (msb == 0)
    return InvalidArgumentError("--max-split-per-batch", "must be -1 (no budget) or >= 1");
  r.max_split_per_batch = static_cast<int32_t>(msb);
  r.is_causal = !f.no_causal;

  // Sparse follows aiter's own sparse test: per-token planning with max = uni = 1, the sizing
  // helper gets the real tokens per request.
  const bool sparse = r.topk >= 0;
  r.qlen = static_cast<int32_t>(qlen);
  r.max_seqlen_qo = sparse ? 1 : r.qlen;
  r.uni_seqlen_qo = r.max_seqlen_qo;

  // --kv-lens: tokens per request -> pages, cumulative.
  if (Trim(f.kv_lens).empty())
    return InvalidArgumentError("--kv-lens",
                                "give at least one request's KV length in tokens "
                                "(e.g. --kv-lens 300,40,700); an empty batch is not "
                                "planned");
  std::vector<std::string> items;
  {
    std::string item;
    std::istringstream in(f.kv_lens);
    while (std::getline(in, item, ',')) items.push_back(item);
    if (!f.kv_lens.empty() && f.kv_lens.back() == ',') items.push_back("");
  }
  if (static_cast<int64_t>(items.size()) > Limit(LimitId::kRequests))
    return ref::TooLarge("--kv-lens", static_cast<int64_t>(items.size()), LimitId::kRequests,
                         "request count");
  r.kv_indptr.assign(1, 0);
  int64_t total_pages = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    MLASIM_ASSIGN_OR_RETURN(const int64_t len,
                            ParseInt("--kv-lens", items[i], 0, Limit(LimitId::kIndptr),
                                     "item " + std::to_string(i + 1) + ":"));
    const int64_t pages = (len + page - 1) / page;
    const int64_t last = len == 0 ? page : len - (pages - 1) * page;
    total_pages += pages;
    if (total_pages > Limit(LimitId::kIndptr))
      return ref::TooLarge("--kv-lens", total_pages, LimitId::kIndptr,
                           "total KV pages (kv_indptr[B])");
    r.kv_indptr.push_back(static_cast<int32_t>(total_pages));
    r.kv_last_page_lens.push_back(static_cast<int32_t>(last));
  }
  const int64_t batch = static_cast<int64_t>(items.size());
  if (qlen * batch > Limit(LimitId::kIndptr))
    return ref::TooLarge("--qlen", qlen * batch, LimitId::kIndptr, "total q tokens (qo_indptr[B])");
  for (int64_t i = 0; i <= batch; ++i) r.qo_indptr.push_back(static_cast<int32_t>(qlen * i));
  MLASIM_RETURN_IF_ERROR(CheckRequestLimits(r));
  return r;
}

StatusOr<ref::PlanRequest> RequestFromFile(const std::string& path) {
  StatusOr<std::string> text = sim::ReadTextFile(path, "--request");
  if (!text.ok()) return text.status();
  StatusOr<json> parsed = sim::ParseJsonStrict(*text, "--request");
  if (!parsed.ok())
    return InvalidArgumentError("--request", "'" + path + "': " + parsed.status().message());
  const json& j = *parsed;
  StatusOr<ref::PlanRequest> r = InvalidArgumentError("", "");
  if (j.is_object() && j.contains("input")) {
    r = io::ParsePlanRequest(j.at("input"), "input", /*allow_update_keys=*/true);
  } else if (j.is_object()) {
    r = io::ParsePlanRequest(j, "input", /*allow_update_keys=*/false);
  } else {
    return InvalidArgumentError("--request", "'" + path +
                                                 "' must hold a JSON object (a golden "
                                                 "`input` object or a record with an `input` key)");
  }
  if (!r.ok()) return r.status();
  MLASIM_RETURN_IF_ERROR(CheckRequestLimits(*r));
  return r;
}

std::string DisplayField(const std::string& field, InputSource source) {
  if (field.empty() || field.rfind("--", 0) == 0) return field;
  if (field == "planner") return "--planner";
  if (source == InputSource::kRequestFile) {
    if (field == "input" || field.rfind("input.", 0) == 0) return field;
    if (field == "batch_size") return "input.kv_indptr";
    return "input." + field;
  }
  static const std::map<std::string, std::string> kFlag = {
      {"heads_per_head_k", "--heads"},
      {"num_heads_k", "--heads"},
      {"cu_count", "--clusters"},
      {"page_size", "--page-size"},
      {"kv_granularity", "--kv-granularity"},
      {"qlen", "--qlen"},
      {"max_seqlen_qo", "--qlen"},
      {"uni_seqlen_qo", "--qlen"},
      {"qo_indptr", "--qlen"},
      {"topk", "--topk"},
      {"max_split_per_batch", "--max-split-per-batch"},
      {"kv_indptr", "--kv-lens"},
      {"kv_last_page_lens", "--kv-lens"},
      {"batch_size", "--kv-lens"},
      {"q_dtype", "--q-dtype"},
      {"kv_dtype", "--kv-dtype"},
      {"target", "--target"},
      {"revision", "--revision"},
      {"is_causal", "--no-causal"}};
  const std::string base = field.substr(0, field.find_first_of(".["));
  const auto it = kFlag.find(base);
  return it == kFlag.end() ? field : it->second;
}

StatusOr<ref::PlannerChoice> ParsePlannerChoice(const std::string& raw) {
  return ref::ParsePlannerChoice(Trim(raw), "--planner");
}

}  // namespace mlasim::cli
