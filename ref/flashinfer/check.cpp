#include "ref/flashinfer/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

namespace mlasim::ref::flashinfer {
namespace {

// One q tile the input implies: request, tile index and its packed rows.
struct Tile {
  int32_t request = 0;
  int32_t tile = 0;
  int32_t row_begin = 0;       // packed row within the request (the work's q_start)
  int32_t rows = 0;            // rows in the tile
  int32_t kv_needed = 0;       // KV tokens its last row attends (causal) or kv_len
  std::vector<int64_t> works;  // in work order
};

class Checker {
 public:
  Checker(const MLAPlanInput& in, const MLAPlanResult& plan, const MLAPlanCheckOptions& opt)
      : in_(in), plan_(plan), opt_(opt) {}
  MLAPlanCheckReport Run();

 private:
  void Add(MLAPlanDiag code, int64_t index, int32_t request, std::string message) {
    report_.diagnostics.push_back({code, index, request, std::move(message)});
  }
  bool CheckShape();
  void BuildTiles();
  void AssignWork(int64_t w);
  void CheckTile(const Tile& t);
  void CheckPartialRows();
  void CheckMerges();
  void CheckMergeEntry(int32_t m, const std::map<int64_t, size_t>& split_tiles,
                       std::vector<std::vector<std::pair<int64_t, int64_t>>>* merged);
  void CheckPages();
  std::vector<int64_t> SortedByKv(const Tile& t) const;

  const MLAPlanInput& in_;
  const MLAPlanResult& plan_;
  MLAPlanCheckOptions opt_;
  int32_t tile_q_ = 0;
  std::vector<Tile> tiles_;
  std::vector<size_t> first_tile_;                     // per request, index into tiles_
  std::unordered_map<int32_t, int32_t> request_at_q_;  // q offset -> non-empty request
  std::vector<bool> has_work_;                         // per request
  MLAPlanCheckReport report_;
};

bool Checker::CheckShape() {
  const int64_t x = plan_.info.num_blks_x, y = plan_.info.num_blks_y;
  if ((x != 1 && x != 2) || y != in_.num_sm / x)
    Add(MLAPlanDiag::kLaunchShape, -1, -1,
        fmt::format("launch {} x {} on {} SMs: expected 1 or 2 CTAs per cluster and num_sm / "
                    "cluster_size clusters",
                    x, y, in_.num_sm));
  if (x != 1 && x != 2) return false;
  tile_q_ = static_cast<int32_t>(x) * kCtaTileQ;
  const auto& wi = plan_.work_indptr;
  const int64_t works = static_cast<int64_t>(plan_.q_indptr.size());
  if (wi.empty() || static_cast<int64_t>(wi.size()) != y + 1 || wi.front() != 0 ||
      wi.back() != works)
    Add(MLAPlanDiag::kWorkIndptrShape, -1, -1,
        fmt::format("work_indptr has {} entries from {} to {}; expected {} from 0 to {} works",
                    wi.size(), wi.empty() ? 0 : wi.front(), wi.empty() ? 0 : wi.back(), y + 1,
                    works));
  for (size_t c = 0; c + 1 < wi.size(); ++c)
    if (wi[c + 1] < wi[c])
      Add(MLAPlanDiag::kWorkIndptrDecreasing, static_cast<int64_t>(c), -1,
          fmt::format("work_indptr[{}] = {} < work_indptr[{}] = {}", c + 1, wi[c + 1], c, wi[c]));
  bool lists_ok = true;
  for (const IntListSpec& spec : kIntLists) {
    const int64_t n = static_cast<int64_t>((plan_.*spec.list).size());
    if (spec.capacity == ListCapacity::kMaxTotalNumWorks && n > kMaxTotalNumWorks)
      Add(MLAPlanDiag::kWorkCountExceedsCapacity, -1, -1,
          fmt::format("{} holds {} entries, its region {}: the copy overwrites what follows",
                      spec.region, n, kMaxTotalNumWorks));
    const bool work_list = spec.capacity == ListCapacity::kMaxTotalNumWorks &&
                           spec.list != &MLAPlanResult::work_indptr;
    if (work_list && n != works) {
      lists_ok = false;
      Add(MLAPlanDiag::kWorkListLength, -1, -1,
          fmt::format("{} has {} entries, mla_q_indptr {}", spec.region, n, works));
    }
  }
  return lists_ok;
}

void Checker::BuildTiles() {
  const int32_t b = static_cast<int32_t>(in_.kv_len.size());
  first_tile_.assign(b + 1, 0);
  has_work_.assign(b, false);
  for (int32_t i = 0; i < b; ++i) {
    first_tile_[i] = tiles_.size();
    const int32_t qo_len = in_.qo_indptr[i + 1] - in_.qo_indptr[i];
    const int32_t packed = qo_len * in_.num_heads;
    if (qo_len > 0) request_at_q_[in_.qo_indptr[i]] = i;
    for (int32_t t = 0; t * tile_q_ < packed; ++t) {
      Tile tile{i, t, t * tile_q_, std::min(tile_q_, packed - t * tile_q_), in_.kv_len[i], {}};
      if (in_.causal) {  // the mask lets packed row r see KV [0, kv_len - qo_len + r / heads]
        const int32_t last_row = tile.row_begin + tile.rows - 1;
        tile.kv_needed =
            std::clamp(in_.kv_len[i] - qo_len + last_row / in_.num_heads + 1, 0, in_.kv_len[i]);
      }
      tiles_.push_back(tile);
    }
  }
  first_tile_[b] = tiles_.size();
}

void Checker::AssignWork(int64_t w) {
  const auto it = request_at_q_.find(plan_.q_indptr[w]);
  const int32_t i = it == request_at_q_.end() ? -1 : it->second;
  if (i < 0 || plan_.q_len[w] != in_.qo_indptr[i + 1] - in_.qo_indptr[i] ||
      plan_.kv_indptr[w] != in_.kv_indptr[i] || plan_.kv_len[w] != in_.kv_len[i]) {
    Add(MLAPlanDiag::kWorkUnknownRequest, w, i,
        fmt::format("work {} (q {} +{}, pages from {}, kv {}) matches no request", w,
                    plan_.q_indptr[w], plan_.q_len[w], plan_.kv_indptr[w], plan_.kv_len[w]));
    return;
  }
  has_work_[i] = true;
  if (plan_.kv_start[w] < 0 || plan_.kv_start[w] > plan_.kv_end[w] ||
      plan_.kv_end[w] > in_.kv_len[i])
    Add(MLAPlanDiag::kKvPastRange, w, i,
        fmt::format("work {} reads KV [{}, {}) of request {} with {} tokens", w, plan_.kv_start[w],
                    plan_.kv_end[w], i, in_.kv_len[i]));
  const int32_t q_start = plan_.q_start[w];
  const size_t t = first_tile_[i] + (q_start >= 0 ? q_start / tile_q_ : 0);
  if (q_start < 0 || q_start % tile_q_ != 0 || t >= first_tile_[i + 1]) {
    Add(MLAPlanDiag::kQStartInvalid, w, i,
        fmt::format("work {} starts at packed row {} of request {}, not a tile of {} rows", w,
                    q_start, i, tile_q_));
    return;
  }
  tiles_[t].works.push_back(w);
}

std::vector<int64_t> Checker::SortedByKv(const Tile& t) const {
  std::vector<int64_t> ws = t.works;
  std::stable_sort(ws.begin(), ws.end(),
                   [&](int64_t a, int64_t b) { return plan_.kv_start[a] < plan_.kv_start[b]; });
  return ws;
}

void Checker::CheckTile(const Tile& t) {
  if (t.works.empty()) {
    Add(MLAPlanDiag::kTileWithoutWork, -1, t.request,
        fmt::format("rows [{}, {}) of request {} are in no work: never written", t.row_begin,
                    t.row_begin + t.rows, t.request));
    return;
  }
  const std::vector<int64_t> ws = SortedByKv(t);
  const bool split = ws.size() > 1;
  int32_t end = 0;
  for (int64_t w : ws) {
    const bool empty_chunk = split && plan_.kv_start[w] == plan_.kv_end[w];
    if (plan_.kv_start[w] != end || empty_chunk)
      Add(MLAPlanDiag::kTileNotCovered, w, t.request,
          fmt::format("work {} covers KV [{}, {}) of request {} tile {}, the previous chunk "
                      "ended at {}",
                      w, plan_.kv_start[w], plan_.kv_end[w], t.request, t.tile, end));
    end = std::max(end, plan_.kv_end[w]);
    if ((plan_.partial_indptr[w] >= 0) != split)
      Add(MLAPlanDiag::kPartialMismatch, w, t.request,
          fmt::format("work {} of a tile of {} works has partial_indptr {}", w, ws.size(),
                      plan_.partial_indptr[w]));
  }
  if (end < t.kv_needed)
    Add(MLAPlanDiag::kTileNotCovered, ws.back(), t.request,
        fmt::format("request {} tile {} is covered up to KV {}, its rows need {}", t.request,
                    t.tile, end, t.kv_needed));
}

void Checker::CheckPartialRows() {
  int64_t capacity = 2 * plan_.info.num_blks_y * int64_t{tile_q_};
  if (const auto* o = FindRegion(plan_.float_regions, kPartialORegion))
    capacity = std::min(capacity, o->bytes / (kPartialOElementBytes * in_.head_dim_o));
  if (const auto* lse = FindRegion(plan_.float_regions, kPartialLseRegion))
    capacity = std::min(capacity, lse->bytes / 4);
  struct Rows {
    int64_t first;
    int64_t work;
    const Tile* tile;
    bool operator<(const Rows& o) const {
      return first < o.first || (first == o.first && work < o.work);
    }
  };
  std::vector<Rows> rows;
  for (const Tile& t : tiles_)
    for (int64_t w : t.works)
      if (plan_.partial_indptr[w] >= 0) rows.push_back({plan_.partial_indptr[w], w, &t});
  std::sort(rows.begin(), rows.end());
  int64_t end = 0;
  for (const Rows& r : rows) {
    const int32_t i = r.tile->request;
    if (r.first < end)
      Add(MLAPlanDiag::kPartialRowsOverlap, r.work, i,
          fmt::format("work {} writes partial rows from {}, rows up to {} are taken", r.work,
                      r.first, end));
    end = std::max(end, r.first + r.tile->rows);
    if (r.first + r.tile->rows > capacity)
      Add(MLAPlanDiag::kPartialRowsExceedCapacity, r.work, i,
          fmt::format("work {} writes partial rows [{}, {}), the float workspace holds {}", r.work,
                      r.first, r.first + r.tile->rows, capacity));
  }
}

void Checker::CheckMergeEntry(int32_t m, const std::map<int64_t, size_t>& split_tiles,
                              std::vector<std::vector<std::pair<int64_t, int64_t>>>* merged) {
  const int64_t start = plan_.merge_packed_offset_start[m], end = plan_.merge_packed_offset_end[m];
  if (start == end) return;  // unused entry
  auto it = split_tiles.upper_bound(start);
  const Tile* t = nullptr;
  int64_t tile_first = 0;
  if (it != split_tiles.begin()) {
    --it;
    t = &tiles_[it->second];
    tile_first = it->first;
  }
  if (t == nullptr || start > end || end > tile_first + t->rows) {
    Add(MLAPlanDiag::kMergeRowsMismatch, m, -1,
        fmt::format("merge {} folds packed rows [{}, {}), within no split tile", m, start, end));
    return;
  }
  (*merged)[it->second].push_back({start, end});
  const std::vector<int64_t> ws = SortedByKv(*t);
  const int64_t p0 = plan_.partial_indptr[ws.front()];
  bool consistent =
      plan_.merge_partial_stride[m] == t->rows &&
      plan_.merge_partial_packed_offset_start[m] == p0 + (start - tile_first) &&
      plan_.merge_partial_packed_offset_end[m] == p0 + static_cast<int64_t>(ws.size()) * t->rows;
  for (size_t j = 0; j < ws.size(); ++j)
    consistent =
        consistent && plan_.partial_indptr[ws[j]] == p0 + static_cast<int64_t>(j) * t->rows;
  if (!consistent)
    Add(MLAPlanDiag::kMergePartialMismatch, m, t->request,
        fmt::format("merge {} reads partial rows from {} to {} by {}; the {} chunks of request {} "
                    "tile {} wrote rows from {} by {}",
                    m, plan_.merge_partial_packed_offset_start[m],
                    plan_.merge_partial_packed_offset_end[m], plan_.merge_partial_stride[m],
                    ws.size(), t->request, t->tile, p0, t->rows));
}

void Checker::CheckMerges() {
  for (const IntListSpec& spec : kIntLists) {
    if (spec.capacity != ListCapacity::kNumSm) continue;
    if (static_cast<int64_t>((plan_.*spec.list).size()) != in_.num_sm) {
      Add(MLAPlanDiag::kMergeListLength, -1, -1,
          fmt::format("{} has {} entries, num_sm is {}", spec.region, (plan_.*spec.list).size(),
                      in_.num_sm));
      return;
    }
  }
  std::map<int64_t, size_t> split_tiles;  // absolute first packed row -> tile
  for (size_t k = 0; k < tiles_.size(); ++k) {
    const Tile& t = tiles_[k];
    const bool split =
        t.works.size() > 1 && std::all_of(t.works.begin(), t.works.end(),
                                          [&](int64_t w) { return plan_.partial_indptr[w] >= 0; });
    if (split) split_tiles[int64_t{in_.qo_indptr[t.request]} * in_.num_heads + t.row_begin] = k;
  }
  std::vector<std::vector<std::pair<int64_t, int64_t>>> merged(tiles_.size());
  for (int32_t m = 0; m < in_.num_sm; ++m) CheckMergeEntry(m, split_tiles, &merged);
  for (const auto& [first, k] : split_tiles) {
    auto& spans = merged[k];
    std::sort(spans.begin(), spans.end());
    int64_t at = first;
    for (const auto& [s, e] : spans) at = s == at ? e : -1;
    if (at != first + tiles_[k].rows)
      Add(MLAPlanDiag::kMergeRowsMismatch, -1, tiles_[k].request,
          fmt::format("the merges of request {} tile {} do not fold rows [{}, {}) exactly once",
                      tiles_[k].request, tiles_[k].tile, first, first + tiles_[k].rows));
  }
}

void Checker::CheckPages() {
  if (opt_.page_size <= 0) return;
  for (size_t i = 0; i < has_work_.size(); ++i) {
    const int64_t pages = in_.kv_indptr[i + 1] - in_.kv_indptr[i];
    if (has_work_[i] && in_.kv_len[i] > pages * opt_.page_size)
      Add(MLAPlanDiag::kKvPastPages, -1, static_cast<int32_t>(i),
          fmt::format("request {} reads {} KV tokens from {} pages of {}", i, in_.kv_len[i], pages,
                      opt_.page_size));
  }
}

MLAPlanCheckReport Checker::Run() {
  if (!CheckShape()) return report_;
  BuildTiles();
  for (int64_t w = 0; w < static_cast<int64_t>(plan_.q_indptr.size()); ++w) AssignWork(w);
  for (const Tile& t : tiles_) CheckTile(t);
  CheckPartialRows();
  CheckMerges();
  CheckPages();
  return report_;
}

}  // namespace

const char* MLAPlanDiagName(MLAPlanDiag d) {
  switch (d) {
    case MLAPlanDiag::kLaunchShape: return "LaunchShape";
    case MLAPlanDiag::kWorkIndptrShape: return "WorkIndptrShape";
    case MLAPlanDiag::kWorkIndptrDecreasing: return "WorkIndptrDecreasing";
    case MLAPlanDiag::kWorkListLength: return "WorkListLength";
    case MLAPlanDiag::kWorkCountExceedsCapacity: return "WorkCountExceedsCapacity";
    case MLAPlanDiag::kWorkUnknownRequest: return "WorkUnknownRequest";
    case MLAPlanDiag::kQStartInvalid: return "QStartInvalid";
    case MLAPlanDiag::kTileWithoutWork: return "TileWithoutWork";
    case MLAPlanDiag::kTileNotCovered: return "TileNotCovered";
    case MLAPlanDiag::kKvPastRange: return "KvPastRange";
    case MLAPlanDiag::kKvPastPages: return "KvPastPages";
    case MLAPlanDiag::kPartialMismatch: return "PartialMismatch";
    case MLAPlanDiag::kPartialRowsOverlap: return "PartialRowsOverlap";
    case MLAPlanDiag::kPartialRowsExceedCapacity: return "PartialRowsExceedCapacity";
    case MLAPlanDiag::kMergeListLength: return "MergeListLength";
    case MLAPlanDiag::kMergeRowsMismatch: return "MergeRowsMismatch";
    case MLAPlanDiag::kMergePartialMismatch: return "MergePartialMismatch";
  }
  return "Unknown";
}

int64_t MLAPlanCheckReport::count(MLAPlanDiag code) const {
  return std::count_if(diagnostics.begin(), diagnostics.end(),
                       [&](const MLAPlanDiagnostic& d) { return d.code == code; });
}

std::string MLAPlanCheckReport::ToString() const {
  std::string out;
  for (const MLAPlanDiagnostic& d : diagnostics)
    out += fmt::format("{} (index {}, request {}): {}\n", MLAPlanDiagName(d.code), d.index,
                       d.request, d.message);
  return out;
}

MLAPlanCheckReport CheckMLAPlan(const MLAPlanInput& input, const MLAPlanResult& plan,
                                const MLAPlanCheckOptions& options) {
  const Status valid = ValidateMLAPlanInput(input);
  MLASIM_ASSERT(valid.ok(), valid.ToString());
  return Checker(input, plan, options).Run();
}

}  // namespace mlasim::ref::flashinfer
