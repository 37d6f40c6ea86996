// File: ref/limits.cpp — the limits table and the checks every planning path runs
// (ref/limits.h, docs/limits.md).
#include "ref/limits.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <string>
#include <vector>

#include "ref/int_text.h"
#include "ref/plan_buffers.h"
#include "ref/sizing.h"

namespace mlasim::ref {

constexpr int64_t kKiB = 1024, kMiB = kKiB * 1024;

// Defaults keep every int32 product and sum inside the planner far from overflow and one plan's
// buffers within 64 MiB; real aiter calls are far below them. Hard maxima equal to the default
// protect int32 arithmetic (aiter computes these in int32) and cannot be raised.
const LimitSpec kLimits[static_cast<int>(LimitId::kCount)] = {
    {LimitId::kClusters, "clusters", 65536, 1 << 20, "CU count (cu_count)",
     "4 bytes of work_indptr per cluster"},
    {LimitId::kHeads, "heads", 4096, 1 << 16, "head count", "folds the batch by heads / 16"},
    {LimitId::kQlen, "qlen", 4096, 1 << 20, "q tokens per request",
     "q rows = requests x qlen (bounded by q_rows)"},
    {LimitId::kPageSize, "page_size", 1 << 20, 1 << 24, "page size (tokens)", "none by itself"},
    {LimitId::kGranularity, "kv_granularity", 1 << 16, 1 << 16,
     "KV granularity (the planner's own bound)", "none by itself"},
    {LimitId::kTopk, "topk", 1 << 24, 1 << 28, "top-k", "sparse walks: topk / page per token"},
    {LimitId::kSplitPerBatch, "max_split_per_batch", 1 << 20, 1 << 28, "split budget",
     "bounded by plan_elements"},
    {LimitId::kRequests, "requests", 1 << 20, 1 << 24, "request count",
     "kv_indptr / kv_last_page_lens: 8 bytes per request"},
    {LimitId::kIndptr, "indptr", 1 << 30, 1 << 30, "indptr value / KV tokens of a request",
     "none by itself (int32 positions)"},
    {LimitId::kVirtualBatches, "virtual_batches", 1 << 24, 1 << 28,
     "virtual batches (requests x head folds x sparse tokens)",
     "about 64 bytes of planner state each: 1 GiB at the default"},
    {LimitId::kQRows, "q_rows", 1 << 24, 1 << 28, "planned q rows", "bounded by plan_elements"},
    {LimitId::kKvPositions, "kv_positions", 1 << 30, 1 << 30,
     "KV positions / blocks the planner walks", "walk time only (int32 positions)"},
    {LimitId::kPlanElements, "plan_elements", 1 << 24, int64_t{1} << 28,
     "int32 elements of one plan's buffers",
     "64 MiB of values + 16 MiB of cell states per plan at the default"},
    {LimitId::kInputBytes, "input_bytes", 64 * kMiB, 1024 * kMiB, "bytes of one JSON input file",
     "the file's text; its parsed tree is bounded by json_values"},
    {LimitId::kScenarioTokens, "scenario_tokens", 1 << 24, 1 << 28,
     "tokens of one scenario value (contexts, rows)", "bounded by plan_elements per plan"},
    // q, KV and o of one call at 2^28 values each (1 GiB of fp32) took 6.8 GB with their
    // reference copies and partial buffers, 1.9 GB at 2^26 (fp64 accumulation); 2^25 keeps a
    // call near 1 GB (docs/limits.md, scripts/memory-bound.sh).
    {LimitId::kTensorValues, "tensor_values", int64_t{1} << 25, int64_t{1} << 31,
     "values of one numerics tensor", "128 MiB of fp32 per tensor at the default"},
    {LimitId::kLaunchGrid, "launch_grid", 1 << 20, 1 << 24, "workgroups of one launch",
     "none (walked, not stored)"},
    {LimitId::kLoopTrips, "loop_trips", int64_t{1} << 26, int64_t{1} << 31,
     "iterations of one contract loop (more is reported as a hang)", "time only"},
    // A contract's loops nest: each under loop_trips, two of them still multiply to 2^52. A call's
    // trips in all (each loop's count charged when it starts) stay under call_trips: a second or
    // two of executor time at the default. The built-in contracts' largest call in a 40 s
    // campaign over four engine profiles used 196,608 (a sparse reduce), 0.15 % of it.
    {LimitId::kCallTrips, "call_trips", int64_t{1} << 27, int64_t{1} << 34,
     "iterations of one call's contract loops in all (more is reported as a hang)", "time only"},
    // nlohmann's DOM is built without recursion (sim/json_input.cpp), but copying, comparing
    // and dumping a document recurse once per level: about 800 bytes of stack a level under
    // AddressSanitizer, so 4096 levels stay within 4 MiB of an 8 MiB stack.
    {LimitId::kJsonDepth, "json_depth", 512, 4096,
     "nesting of arrays and objects in one JSON input",
     "stack only: about 800 bytes a level when a document is copied or dumped"},
    // A parsed value costs 16 bytes (an array element) to about 100 (an empty object: its map),
    // so 2^22 values keep a tree near 400 MB whatever the input, and a reader may copy it (a
    // 64 MiB `[{},{},...]`, 22 million objects, took 2.1 GB). 2^22 holds a plan request of 2^20
    // requests (3 values each).
    {LimitId::kJsonValues, "json_values", int64_t{1} << 22, int64_t{1} << 28,
     "values in one JSON input (numbers, strings, arrays, objects)",
     "about 100 bytes a value at most: about 400 MB at the default"},
    // A compiled statement holds its path, source and expressions: about 4 KB with its share of
    // the tree. A 32 MiB contract of 900,000 nested reads took 3.8 GB and 4 minutes to replay
    // (scripts/memory-bound.sh); the built-in contracts have at most a few dozen statements.
    {LimitId::kContractStatements, "contract_statements", 4096, 1 << 20,
     "statements of one contract's program (nested ones included)",
     "about 4 KB a statement: 16 MiB at the default"},
};

namespace {

std::array<std::atomic<int64_t>, static_cast<size_t>(LimitId::kCount)>& Values() {
  static std::array<std::atomic<int64_t>, static_cast<size_t>(LimitId::kCount)> v;
  static const bool init = [] {
    for (const LimitSpec& s : kLimits) v[static_cast<size_t>(s.id)].store(s.default_value);
    return true;
  }();
  (void)init;
  return v;
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

const LimitSpec* FindLimit(const std::string& name) {
  for (const LimitSpec& s : kLimits)
    if (name == s.name) return &s;
  return nullptr;
}

std::string KnownNames() {
  std::string out;
  for (const LimitSpec& s : kLimits) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}

int64_t FoldBound(const PlanRequest& r) {
  const int64_t heads = int64_t{r.heads_per_head_k} * r.num_heads_k;
  return std::max<int64_t>(1, heads / 16);
}

}  // namespace

int64_t Limit(LimitId id) {
  return Values()[static_cast<size_t>(id)].load(std::memory_order_relaxed);
}

Status SetLimits(const std::string& spec, const std::string& field) {
  std::vector<std::pair<const LimitSpec*, int64_t>> parsed;
  if (Trim(spec).empty()) return OkStatus();  // nothing to set
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string item = Trim(spec.substr(start, comma - start));
    start = comma + 1;
    if (item.empty())  // was skipped: refused as the kernels' configs refuse it (round 8)
      return InvalidArgumentError(
          field, "empty item: a leading, trailing or doubled comma (got '" + spec + "')");
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return InvalidArgumentError(
          field, "'" + item + "' is not NAME=VALUE (limits: " + KnownNames() + "; docs/limits.md)");
    const std::string name = Trim(item.substr(0, eq)), text = Trim(item.substr(eq + 1));
    const LimitSpec* s = FindLimit(name);
    if (!s)
      return InvalidArgumentError(field,
                                  "no limit named '" + name + "' (limits: " + KnownNames() + ")");
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec == std::errc::invalid_argument || ptr != text.data() + text.size())
      return InvalidArgumentError(field, name + ": '" + text + "' is not a decimal integer");
    if (ec == std::errc::result_out_of_range && IsDecimalBeyond64Bits(text))
      return InvalidArgumentError(
          field, name + ": " + Beyond64BitsText(text, "1.." + std::to_string(s->hard_max)));
    if (ec == std::errc::result_out_of_range || v < 1 || v > s->hard_max)
      return InvalidArgumentError(field, name + ": " + text + " is outside 1.." +
                                             std::to_string(s->hard_max) +
                                             " (its hard maximum keeps the arithmetic exact)");
    for (const auto& [earlier, unused] : parsed)
      if (earlier == s)  // the last value won: which one was meant is a guess (round 8)
        return InvalidArgumentError(
            field, name + " given twice (got '" + spec + "'; each limit at most once)");
    parsed.emplace_back(s, v);
  }
  for (const auto& [s, v] : parsed) Values()[static_cast<size_t>(s->id)].store(v);
  return OkStatus();
}

Status SetLimitsFromEnvironment() {
  const char* env = std::getenv("MLASIM_LIMITS");
  if (!env) return OkStatus();
  return SetLimits(env, "MLASIM_LIMITS");
}

void ResetLimits() {
  for (const LimitSpec& s : kLimits) Values()[static_cast<size_t>(s.id)].store(s.default_value);
}

Status TooLarge(const std::string& field, int64_t got, LimitId id, const std::string& what) {
  const LimitSpec& s = kLimits[static_cast<int>(id)];
  const std::string name = s.name;
  std::string how;
  if (s.hard_max > Limit(id))
    how = " (raise it with --limit " + name + "=N or MLASIM_LIMITS=" + name + "=N, up to " +
          std::to_string(s.hard_max) + ")";
  else if (s.hard_max > s.default_value)  // raised as far as it goes
    how = " (" + name + " is at its hard maximum)";
  else
    how = " (limit " + name + ", which cannot be raised: it keeps int32 arithmetic exact)";
  return ResourceExhaustedError(field, what + " is " + std::to_string(got) +
                                           ", above mlasim's limit of " +
                                           std::to_string(Limit(id)) + how);
}

Status CheckRequestLimits(const PlanRequest& r) {
  if (r.cu_count > Limit(LimitId::kClusters))
    return TooLarge("cu_count", r.cu_count, LimitId::kClusters, "CU count");
  if (r.heads_per_head_k > Limit(LimitId::kHeads))
    return TooLarge("heads_per_head_k", r.heads_per_head_k, LimitId::kHeads, "head count");
  if (r.num_heads_k > Limit(LimitId::kHeads))
    return TooLarge("num_heads_k", r.num_heads_k, LimitId::kHeads, "KV heads");
  const int64_t heads = int64_t{r.heads_per_head_k} * r.num_heads_k;
  if (heads > Limit(LimitId::kHeads))
    return TooLarge("num_heads_k", heads, LimitId::kHeads, "total q heads");
  if (r.qlen > Limit(LimitId::kQlen))
    return TooLarge("qlen", r.qlen, LimitId::kQlen, "q tokens per request");
  if (r.max_seqlen_qo > Limit(LimitId::kQlen))
    return TooLarge("max_seqlen_qo", r.max_seqlen_qo, LimitId::kQlen, "q tokens per request");
  if (r.uni_seqlen_qo > Limit(LimitId::kQlen))
    return TooLarge("uni_seqlen_qo", r.uni_seqlen_qo, LimitId::kQlen, "q tokens per request");
  if (r.page_size > Limit(LimitId::kPageSize))
    return TooLarge("page_size", r.page_size, LimitId::kPageSize, "page size");
  if (r.kv_granularity > Limit(LimitId::kGranularity))
    return TooLarge("kv_granularity", r.kv_granularity, LimitId::kGranularity, "granularity");
  if (r.topk > Limit(LimitId::kTopk)) return TooLarge("topk", r.topk, LimitId::kTopk, "topk");
  if (r.max_split_per_batch > Limit(LimitId::kSplitPerBatch))
    return TooLarge("max_split_per_batch", r.max_split_per_batch, LimitId::kSplitPerBatch,
                    "split budget");
  const int64_t requests = static_cast<int64_t>(r.kv_indptr.size()) - 1;
  if (requests > Limit(LimitId::kRequests))
    return TooLarge("kv_indptr", requests, LimitId::kRequests, "request count");
  // Read once: the loops below run per request, and the simulator checks every plan it builds.
  const int64_t max_indptr = Limit(LimitId::kIndptr);
  for (size_t i = 0; i < r.kv_indptr.size(); ++i)
    if (r.kv_indptr[i] > max_indptr)
      return TooLarge("kv_indptr[" + std::to_string(i) + "]", r.kv_indptr[i], LimitId::kIndptr,
                      "value");
  for (size_t i = 0; i + 1 < r.kv_indptr.size(); ++i) {
    const int64_t tokens = (int64_t{r.kv_indptr[i + 1]} - r.kv_indptr[i]) * r.page_size;
    if (tokens > max_indptr)
      return TooLarge("kv_indptr[" + std::to_string(i + 1) + "]", tokens, LimitId::kIndptr,
                      "KV tokens of request " + std::to_string(i) + " (pages x page_size)");
  }
  for (size_t i = 0; i < r.qo_indptr.size(); ++i)
    if (r.qo_indptr[i] > max_indptr || r.qo_indptr[i] < -max_indptr)
      return TooLarge("qo_indptr[" + std::to_string(i) + "]", r.qo_indptr[i], LimitId::kIndptr,
                      "value");
  // The planner walks requests x fold (x tokens when sparse) virtual batches.
  int64_t tokens = 1;
  if (r.topk >= 0 && r.qo_indptr.size() >= 2) {
    tokens = int64_t{r.qo_indptr[1]} - r.qo_indptr[0];
    if (tokens > Limit(LimitId::kQlen))
      return TooLarge("qo_indptr[1]", tokens, LimitId::kQlen, "sparse tokens per request");
    tokens = std::max<int64_t>(tokens, 1);
  }
  const int64_t virtual_batches = std::max<int64_t>(requests, 0) * FoldBound(r) * tokens;
  if (virtual_batches > Limit(LimitId::kVirtualBatches))
    return TooLarge("kv_indptr", virtual_batches, LimitId::kVirtualBatches,
                    "virtual batches (requests x head folds x sparse tokens)");
  if (r.max_split_per_batch > 0 &&
      int64_t{r.max_split_per_batch} * std::max<int64_t>(requests, 1) * FoldBound(r) > INT32_MAX)
    return InvalidArgumentError(
        "max_split_per_batch",
        "split budget x virtual batches overflows int32; use a smaller budget");
  return OkStatus();
}

Status CheckPlannerLimits(const PlanRequest& r, const PlanDerived& d) {
  const bool sparse = r.topk >= 0;
  const int64_t requests = static_cast<int64_t>(r.kv_indptr.size()) - 1;
  const int64_t tokens = sparse && r.qo_indptr.size() >= 2
                             ? std::max<int64_t>(1, int64_t{r.qo_indptr[1]} - r.qo_indptr[0])
                             : 1;
  const int64_t fold = std::max(d.fold_ratio, 1);
  const int64_t virtual_batches = requests * fold * tokens;
  const int64_t uni = std::max(r.uni_seqlen_qo, 1);
  if (virtual_batches * uni > Limit(LimitId::kQRows))
    return TooLarge("kv_indptr", virtual_batches * uni, LimitId::kQRows,
                    "planned q rows (virtual batches x uni_seqlen_qo)");
  // KV space the walk moves through: the request's pages (dense) or one top-k row per token.
  const int64_t extent = sparse ? requests * tokens * std::max(d.topk_pages, 0)
                                : int64_t{r.kv_indptr.back()} - r.kv_indptr.front();
  if (extent > Limit(LimitId::kKvPositions))
    return TooLarge("kv_indptr", extent, LimitId::kKvPositions, "KV positions the planner walks");
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
    if (blocks > Limit(LimitId::kKvPositions))
      return TooLarge("kv_indptr", blocks, LimitId::kKvPositions, "planned KV blocks (sum_blocks)");
  }
  const int64_t payload = blocks / std::max(d.num_splits, 1) + 2 + ovh;
  if (extent + (payload + 1) * gran > Limit(LimitId::kKvPositions) * 2 - 1)
    return InvalidArgumentError("kv_granularity",
                                "one cluster's share of the KV (" + std::to_string(payload) +
                                    " blocks of " + std::to_string(gran) +
                                    " pages) would overflow the planner's int32 "
                                    "KV positions; use a smaller granularity or more clusters");
  return OkStatus();
}

Status CheckSizesLimit(const MetadataSizes& s) {
  // In int32 elements (a uint64 counts as two), over kPlanBuffers.
  int64_t elements = 0, largest = -1;
  const PlanBufferSpec* top = &kPlanBuffers[0];
  for (const PlanBufferSpec& spec : kPlanBuffers) {
    const int64_t n = s.Elements(spec.id) * (spec.element_bytes / 4);
    elements += n;
    if (n > largest) largest = n, top = &spec;
  }
  if (elements <= Limit(LimitId::kPlanElements)) return OkStatus();
  // The field is the batch the sizes come from; the buffer that dominates names what drives it
  // (work_info's rows grow with qlen x heads as well as with B).
  const Status st = TooLarge("batch_size", elements, LimitId::kPlanElements,
                             "the get_mla_metadata_info_v1 buffers' int32 element count");
  return InvalidArgumentError(st.field(), st.message() + "; the largest is " + top->name + ", " +
                                              std::to_string(largest) +
                                              " int32 elements (rows: " + top->rows + ")");
}

Status CheckPlanInputLimits(const PlanRequest& request, PlannerChoice choice) {
  MLASIM_RETURN_IF_ERROR(CheckRequestLimits(request));
  MLASIM_RETURN_IF_ERROR(ValidatePlanRequest(request));
  const int32_t batch = static_cast<int32_t>(request.kv_indptr.size()) - 1;
  MLASIM_ASSIGN_OR_RETURN(const MetadataSizes sizes, GetMlaMetadataInfoV1(request, batch));
  MLASIM_RETURN_IF_ERROR(CheckSizesLimit(sizes));
  MLASIM_ASSIGN_OR_RETURN(const PlanDerived derived, DecidePlan(request, choice));
  return CheckPlannerLimits(request, derived);
}

}  // namespace mlasim::ref
