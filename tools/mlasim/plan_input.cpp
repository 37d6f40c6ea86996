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

#include "ref/planner.h"
#include "sim/scenario_json.h"
#include "tools/io/request_json.h"

namespace mlasim::cli {
namespace {

using nlohmann::json;

// Limits (docs/cli.md, "Limits"). They keep every int32 product and sum inside the planner far
// from overflow and the buffers within a few hundred MiB; real aiter calls are far below them.
constexpr int64_t kMaxClusters = 65536;
constexpr int64_t kMaxHeads = 4096;        // num_heads_k * heads_per_head_k
constexpr int64_t kMaxQlen = 4096;         // qlen, max_seqlen_qo, uni_seqlen_qo, sparse tokens
constexpr int64_t kMaxPageSize = 1 << 20;  // page_size
constexpr int64_t kMaxGranularity =
    1 << 16;  // kv_granularity: the planner's own bound (ValidatePlanRequest)
constexpr int64_t kMaxTopk = 1 << 24;
constexpr int64_t kMaxSplitPerBatch = 1 << 20;
constexpr int64_t kMaxRequests = 1 << 20;
constexpr int64_t kMaxIndptr = 1 << 30;          // any kv_indptr / qo_indptr entry; KV tokens
constexpr int64_t kMaxVirtualBatches = 1 << 24;  // requests x fold x (sparse: tokens)
constexpr int64_t kMaxQRows = 1 << 24;           // virtual batches x q rows per virtual batch
constexpr int64_t kMaxKvPosition = 1 << 30;      // planner KV positions, block sums, tokens

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// A decimal integer in [lo, hi], the whole text (surrounding blanks allowed).
StatusOr<int64_t> ParseInt(const std::string& field, const std::string& raw, int64_t lo, int64_t hi,
                           const std::string& what = "") {
  const std::string text = Trim(raw);
  const std::string name = what.empty() ? std::string() : what + " ";
  int64_t v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(first, last, v);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != last)
    return InvalidArgumentError(field, name + "'" + raw + "' is not an integer");
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

Status TooLarge(const std::string& field, int64_t got, int64_t limit, const std::string& what) {
  return InvalidArgumentError(field, what + " is " + std::to_string(got) +
                                         ", above mlasim's limit of " + std::to_string(limit));
}

int64_t FoldBound(const ref::PlanRequest& r) {
  const int64_t heads = int64_t{r.heads_per_head_k} * r.num_heads_k;
  return std::max<int64_t>(1, heads / 16);
}

}  // namespace

std::vector<std::string> PlanFlags::GivenFlags() const {
  std::vector<std::string> given;
  for (const CLI::Option* o : options)
    if (o->count() > 0) given.push_back(o->get_name());
  return given;
}

void AddPlanFlags(CLI::App& cmd, PlanFlags& f) {
  auto add = [&](const char* name, std::string& dest, const char* type, const char* help) {
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
  add("--q-dtype", f.q_dtype, "bf16|fp16|fp8", "q dtype");
  add("--kv-dtype", f.kv_dtype, "bf16|fp16|fp8", "KV dtype");
  add("--target", f.target, "gfx942|gfx950|sm90", "target GPU profile");
  add("--revision", f.revision, "2026-03|2026-08", "aiter revision whose planner is modelled");
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
  MLASIM_ASSIGN_OR_RETURN(const int64_t heads, ParseInt("--heads", f.heads, 1, kMaxHeads));
  r.heads_per_head_k = static_cast<int32_t>(heads);
  r.num_heads_k = 1;
  if (Trim(f.clusters).empty()) {
    r.cu_count = ref::GetTargetProfile(r.target).cu_count;
  } else {
    MLASIM_ASSIGN_OR_RETURN(const int64_t cu, ParseInt("--clusters", f.clusters, 1, kMaxClusters));
    r.cu_count = static_cast<int32_t>(cu);
  }
  MLASIM_ASSIGN_OR_RETURN(const int64_t page,
                          ParseInt("--page-size", f.page_size, 1, kMaxPageSize));
  r.page_size = static_cast<int32_t>(page);
  MLASIM_ASSIGN_OR_RETURN(const int64_t gran,
                          ParseInt("--kv-granularity", f.kv_granularity, 1, kMaxGranularity));
  r.kv_granularity = static_cast<int32_t>(gran);
  MLASIM_ASSIGN_OR_RETURN(const int64_t qlen, ParseInt("--qlen", f.qlen, 1, kMaxQlen));
  MLASIM_ASSIGN_OR_RETURN(const int64_t topk, ParseInt("--topk", f.topk, -1, kMaxTopk));
  r.topk = static_cast<int32_t>(topk);
  MLASIM_ASSIGN_OR_RETURN(
      const int64_t msb,
      ParseInt("--max-split-per-batch", f.max_split_per_batch, -1, kMaxSplitPerBatch));
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
  if (static_cast<int64_t>(items.size()) > kMaxRequests)
    return TooLarge("--kv-lens", static_cast<int64_t>(items.size()), kMaxRequests, "request count");
  r.kv_indptr.assign(1, 0);
  int64_t total_pages = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    MLASIM_ASSIGN_OR_RETURN(const int64_t len, ParseInt("--kv-lens", items[i], 0, kMaxIndptr,
                                                        "item " + std::to_string(i + 1) + ":"));
    const int64_t pages = (len + page - 1) / page;
    const int64_t last = len == 0 ? page : len - (pages - 1) * page;
    total_pages += pages;
    if (total_pages > kMaxIndptr)
      return TooLarge("--kv-lens", total_pages, kMaxIndptr, "total KV pages (kv_indptr[B])");
    r.kv_indptr.push_back(static_cast<int32_t>(total_pages));
    r.kv_last_page_lens.push_back(static_cast<int32_t>(last));
  }
  const int64_t batch = static_cast<int64_t>(items.size());
  if (qlen * batch > kMaxIndptr)
    return TooLarge("--qlen", qlen * batch, kMaxIndptr, "total q tokens (qo_indptr[B])");
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

Status CheckRequestLimits(const ref::PlanRequest& r) {
  if (r.cu_count > kMaxClusters) return TooLarge("cu_count", r.cu_count, kMaxClusters, "CU count");
  if (r.heads_per_head_k > kMaxHeads)
    return TooLarge("heads_per_head_k", r.heads_per_head_k, kMaxHeads, "head count");
  if (r.num_heads_k > kMaxHeads)
    return TooLarge("num_heads_k", r.num_heads_k, kMaxHeads, "KV heads");
  const int64_t heads = int64_t{r.heads_per_head_k} * r.num_heads_k;
  if (heads > kMaxHeads) return TooLarge("num_heads_k", heads, kMaxHeads, "total q heads");
  if (r.qlen > kMaxQlen) return TooLarge("qlen", r.qlen, kMaxQlen, "q tokens per request");
  if (r.max_seqlen_qo > kMaxQlen)
    return TooLarge("max_seqlen_qo", r.max_seqlen_qo, kMaxQlen, "q tokens per request");
  if (r.uni_seqlen_qo > kMaxQlen)
    return TooLarge("uni_seqlen_qo", r.uni_seqlen_qo, kMaxQlen, "q tokens per request");
  if (r.page_size > kMaxPageSize)
    return TooLarge("page_size", r.page_size, kMaxPageSize, "page size");
  if (r.kv_granularity > kMaxGranularity)
    return TooLarge("kv_granularity", r.kv_granularity, kMaxGranularity, "granularity");
  if (r.topk > kMaxTopk) return TooLarge("topk", r.topk, kMaxTopk, "topk");
  if (r.max_split_per_batch > kMaxSplitPerBatch)
    return TooLarge("max_split_per_batch", r.max_split_per_batch, kMaxSplitPerBatch,
                    "split budget");
  const int64_t requests = static_cast<int64_t>(r.kv_indptr.size()) - 1;
  if (requests > kMaxRequests)
    return TooLarge("kv_indptr", requests, kMaxRequests, "request count");
  for (size_t i = 0; i < r.kv_indptr.size(); ++i)
    if (r.kv_indptr[i] > kMaxIndptr)
      return TooLarge("kv_indptr[" + std::to_string(i) + "]", r.kv_indptr[i], kMaxIndptr, "value");
  for (size_t i = 0; i + 1 < r.kv_indptr.size(); ++i) {
    const int64_t tokens = (int64_t{r.kv_indptr[i + 1]} - r.kv_indptr[i]) * r.page_size;
    if (tokens > kMaxIndptr)
      return TooLarge("kv_indptr[" + std::to_string(i + 1) + "]", tokens, kMaxIndptr,
                      "KV tokens of request " + std::to_string(i) + " (pages x page_size)");
  }
  for (size_t i = 0; i < r.qo_indptr.size(); ++i)
    if (r.qo_indptr[i] > kMaxIndptr || r.qo_indptr[i] < -kMaxIndptr)
      return TooLarge("qo_indptr[" + std::to_string(i) + "]", r.qo_indptr[i], kMaxIndptr, "value");
  // The planner walks requests x fold (x tokens when sparse) virtual batches.
  int64_t tokens = 1;
  if (r.topk >= 0 && r.qo_indptr.size() >= 2) {
    tokens = int64_t{r.qo_indptr[1]} - r.qo_indptr[0];
    if (tokens > kMaxQlen)
      return TooLarge("qo_indptr[1]", tokens, kMaxQlen, "sparse tokens per request");
    tokens = std::max<int64_t>(tokens, 1);
  }
  const int64_t virtual_batches = std::max<int64_t>(requests, 0) * FoldBound(r) * tokens;
  if (virtual_batches > kMaxVirtualBatches)
    return TooLarge("kv_indptr", virtual_batches, kMaxVirtualBatches,
                    "virtual batches (requests x head folds x sparse tokens)");
  if (r.max_split_per_batch > 0 &&
      int64_t{r.max_split_per_batch} * std::max<int64_t>(requests, 1) * FoldBound(r) > INT32_MAX)
    return InvalidArgumentError(
        "max_split_per_batch",
        "split budget x virtual batches overflows int32; use a smaller budget");
  return OkStatus();
}

Status CheckPlannerLimits(const ref::PlanRequest& r, const ref::PlanDerived& d) {
  const bool sparse = r.topk >= 0;
  const int64_t requests = static_cast<int64_t>(r.kv_indptr.size()) - 1;
  const int64_t tokens = sparse && r.qo_indptr.size() >= 2
                             ? std::max<int64_t>(1, int64_t{r.qo_indptr[1]} - r.qo_indptr[0])
                             : 1;
  const int64_t fold = std::max(d.fold_ratio, 1);
  const int64_t virtual_batches = requests * fold * tokens;
  const int64_t uni = std::max(r.uni_seqlen_qo, 1);
  if (virtual_batches * uni > kMaxQRows)
    return TooLarge("kv_indptr", virtual_batches * uni, kMaxQRows,
                    "planned q rows (virtual batches x uni_seqlen_qo)");
  // KV space the walk moves through: the request's pages (dense) or one top-k row per token.
  const int64_t extent = sparse ? requests * tokens * std::max(d.topk_pages, 0)
                                : int64_t{r.kv_indptr.back()} - r.kv_indptr.front();
  if (extent > kMaxKvPosition)
    return TooLarge("kv_indptr", extent, kMaxKvPosition, "KV positions the planner walks");
  // sum_blocks and payload as the planner computes them, bounded from above: q tiles per virtual
  // batch are at most uni_seqlen_qo (1 without a q split).
  const int64_t tiles = d.qo_split ? uni : 1;
  const int64_t gran = std::max(r.kv_granularity, 1);
  const int64_t ovh = std::max(d.fixed_overhead_blocks, 1);
  int64_t blocks = 0;
  for (int64_t b = 0; b < requests; ++b) {
    int64_t len = int64_t{r.kv_indptr[b + 1]} - r.kv_indptr[b];
    if (sparse) len = std::min<int64_t>(len, std::max(d.topk_pages, 0));
    blocks += ((len + gran - 1) / gran + ovh) * fold * tokens * tiles;
    if (blocks > kMaxKvPosition)
      return TooLarge("kv_indptr", blocks, kMaxKvPosition, "planned KV blocks (sum_blocks)");
  }
  const int64_t payload = blocks / std::max(d.num_splits, 1) + 2 + ovh;
  if (extent + (payload + 1) * gran > kMaxKvPosition * 2 - 1)
    return InvalidArgumentError("kv_granularity",
                                "one cluster's share of the KV (" + std::to_string(payload) +
                                    " blocks of " + std::to_string(gran) +
                                    " pages) would overflow the planner's int32 "
                                    "KV positions; use a smaller granularity or more clusters");
  return OkStatus();
}

Status CheckSizesLimit(const ref::MetadataSizes& s) {
  // In int32 elements (a uint64 counts as two), over ref::kPlanBuffers.
  int64_t elements = 0;
  for (const ref::PlanBufferSpec& spec : ref::kPlanBuffers)
    elements += s.Elements(spec.id) * (spec.element_bytes / 4);
  if (elements > kMaxBufferElements)
    return InvalidArgumentError(
        "batch_size",
        "the get_mla_metadata_info_v1 buffers would hold " + std::to_string(elements) +
            " int32 elements; mlasim plan refuses more than " + std::to_string(kMaxBufferElements));
  return OkStatus();
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
