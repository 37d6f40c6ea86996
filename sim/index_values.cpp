#include "sim/index_values.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sim/engine.h"

namespace mlasim::sim {
namespace {

// Tokens whose regions fill `c` writes (FillContent's n), and token t's region length.
int32_t FillTokens(const Call& c) {
  return std::min<int32_t>(c.fill_tokens, static_cast<int32_t>(c.fill_indptr.size()) - 1);
}
int64_t RegionLength(const Call& c, int32_t token) {
  return int64_t{c.fill_indptr[token + 1]} - c.fill_indptr[token];
}

// The index fills of `t` that place explicit values (a modelled KV cache gives them content).
std::vector<const Call*> ContentFills(const Trace& t) {
  std::vector<const Call*> out;
  for (const Call& c : t.calls)
    if (c.kind == CallKind::kIndexFill && c.fill_content) out.push_back(&c);
  return out;
}

bool Placed(const KvCacheSpec::IndexValue& v, const std::vector<const Call*>& fills) {
  for (const Call* c : fills)
    if (v.token < FillTokens(*c) && v.position < RegionLength(*c, v.token)) return true;
  return false;
}

// Why no fill places `v`: measured against the fill with the most tokens.
std::string WhyUnplaced(const KvCacheSpec::IndexValue& v, const std::vector<const Call*>& fills) {
  if (fills.empty())
    return "the step has no index fill that writes values (the KV cache is modelled but no call "
           "fills an index buffer)";
  const Call* widest = fills.front();
  for (const Call* c : fills)
    if (FillTokens(*c) > FillTokens(*widest)) widest = c;
  const std::string fill = widest->step + "." + widest->name;
  const int32_t n = FillTokens(*widest);
  if (v.token >= n)
    return fmt::format(
        "token {} is past the {} token region(s) of the step's widest index fill ({}), so no fill "
        "places value {}; tokens are 0..{}",
        v.token, n, fill, v.value, n - 1);
  int64_t longest = 0;
  for (const Call* c : fills)
    if (v.token < FillTokens(*c)) longest = std::max(longest, RegionLength(*c, v.token));
  return fmt::format(
      "position {} is past token {}'s region of {} slot(s) (its longest over the step's index "
      "fills, {} the widest), so no fill places value {}; positions are 0..{}",
      v.position, v.token, longest, fill, v.value, longest - 1);
}

}  // namespace

void DropRepeatedIndexSlots(Scenario& s) {
  std::set<std::pair<int32_t, int32_t>> slots;
  std::vector<KvCacheSpec::IndexValue> kept;
  for (const KvCacheSpec::IndexValue& v : s.kv_cache.index_values)
    if (slots.emplace(v.token, v.position).second) kept.push_back(v);
  s.kv_cache.index_values = std::move(kept);
}

Status CheckIndexValuesPlaced(const Scenario& s, const Trace& t) {
  if (s.kv_cache.index_values.empty()) return OkStatus();
  const std::vector<const Call*> fills = ContentFills(t);
  for (size_t i = 0; i < s.kv_cache.index_values.size(); ++i) {
    const KvCacheSpec::IndexValue& v = s.kv_cache.index_values[i];
    if (!Placed(v, fills))
      return InvalidArgumentError("$.kv_cache.index_values[" + std::to_string(i) + "]",
                                  WhyUnplaced(v, fills));
  }
  return OkStatus();
}

std::vector<int32_t> UnplacedIndexValues(const Scenario& s, const Trace& t) {
  std::vector<int32_t> out;
  if (s.kv_cache.index_values.empty()) return out;
  const std::vector<const Call*> fills = ContentFills(t);
  for (size_t i = 0; i < s.kv_cache.index_values.size(); ++i)
    if (!Placed(s.kv_cache.index_values[i], fills)) out.push_back(static_cast<int32_t>(i));
  return out;
}

void DropUnplacedIndexValues(Scenario& s) {
  if (s.kv_cache.index_values.empty()) return;
  DropRepeatedIndexSlots(s);
  StatusOr<Trace> t = ExpandStep(s);
  if (!t.ok()) return;
  const std::vector<const Call*> fills = ContentFills(*t);
  auto& values = s.kv_cache.index_values;
  values.erase(std::remove_if(values.begin(), values.end(),
                              [&](const KvCacheSpec::IndexValue& v) { return !Placed(v, fills); }),
               values.end());
}

}  // namespace mlasim::sim
