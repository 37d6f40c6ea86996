#include "ref/plan_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace mlasim::ref {
namespace {

int32_t CeilDiv(int32_t a, int32_t b) {
  return (a + b - 1) / b;
}
std::string S(int64_t x) {
  return std::to_string(x);
}
std::string Range(int64_t a, int64_t b) {
  return "[" + S(a) + "," + S(b) + ")";
}
// Range(a, b) as a fmt argument: "[a,b)".
struct Rng {
  int64_t a, b;
};
// Checker::Label(t): "tile t (batch b, q [q0,q1))".
struct TileLabel {
  int32_t t, batch_idx, q0, q1;
};

}  // namespace
}  // namespace mlasim::ref

namespace mlasim::ref {
namespace {
// Writes text and decimal integers to a fmt output iterator: the formatters below, without a
// format string to parse per finding.
template <class Out>
Out Put(Out out, std::string_view text) {
  return std::copy(text.begin(), text.end(), out);
}
template <class Out>
Out Put(Out out, int64_t x) {
  const fmt::format_int digits(x);
  return std::copy(digits.data(), digits.data() + digits.size(), out);
}
}  // namespace
}  // namespace mlasim::ref

template <>
struct fmt::formatter<mlasim::ref::Rng> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  template <class Context>
  auto format(const mlasim::ref::Rng& r, Context& ctx) const {
    using mlasim::ref::Put;
    return Put(Put(Put(Put(Put(ctx.out(), "["), r.a), ","), r.b), ")");
  }
};

template <>
struct fmt::formatter<mlasim::ref::TileLabel> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  template <class Context>
  auto format(const mlasim::ref::TileLabel& l, Context& ctx) const {
    using mlasim::ref::Put;
    auto out = Put(Put(Put(Put(ctx.out(), "tile "), l.t), " (batch "), l.batch_idx);
    return Put(Put(Put(Put(Put(out, ", q ["), l.q0), ","), l.q1), "))");
  }
};

namespace mlasim::ref {
namespace {

// Runs `report` out of line: the per-tile and per-piece checks stay small enough to inline, and
// the code that builds a finding's message is kept off their path.
template <class F>
[[gnu::cold, gnu::noinline]] void Cold(const F& report) {
  report();
}

// The work rows of one tile, in work order: a view into the checker's flat lists.
struct Pieces {
  const int32_t* rows = nullptr;
  size_t n = 0;
  size_t size() const { return n; }
  bool empty() const { return n == 0; }
  int32_t operator[](size_t i) const { return rows[i]; }
  int32_t back() const { return rows[n - 1]; }
};

void FillExpectedTiles(const PlanRequest& r, const PlanDerived& d, std::vector<ExpectedTile>& out);

// A partial-row range of one work item (CheckPartialRows). int64: captured buffers hold any
// int32, and loc + length may overflow int32.
struct PartialRows {
  int64_t begin, end;
  int32_t work;
};

// The checker's per-call lists, kept per thread between calls so that a call allocates only when
// a plan outgrows every earlier one (CheckPlan runs about twice per fuzz case). Every list is
// cleared or assigned before use: no state passes from one call to the next.
struct CheckScratch {
  std::vector<ExpectedTile> tiles;
  std::vector<int32_t> piece_begin, piece_rows, tile_of, last_piece;
  std::vector<int32_t> work_rows;  // 0, 1, 2, ...: the pieces when every tile's are in work order
  std::vector<std::pair<int32_t, int32_t>> by_q0;
  std::vector<PartialRows> rows;
};

class Checker {
 public:
  Checker(const PlanRequest& r, const Plan& p, CheckScratch& s, bool warnings)
      : warnings_(warnings),
        r_(r),
        p_(p),
        rules_(GetRevisionRules(r.revision)),
        tiles_(s.tiles),
        piece_begin_(s.piece_begin),
        s_(s) {}
  PlanCheckReport Run();

 private:
  void Add(PlanDiag code, std::string buffer, int64_t index, int32_t tile, int32_t work,
           std::string msg, Severity sev = Severity::kError) {
    report_.diagnostics.push_back(
        {code, sev, std::move(buffer), index, tile, work, std::move(msg)});
  }
  bool CheckWorkIndptr();
  void CheckBuffersAndInputs();
  void AssignWorks();
  template <class Finder>
  void AssignWorksWith(Finder find);
  [[gnu::cold, gnu::noinline]] void ReportUnwrittenRow(int32_t w);
  [[gnu::cold, gnu::noinline]] void ReportOutsideRequest(int32_t w, int32_t q0, int32_t q1);
  [[gnu::cold, gnu::noinline]] void ReportBatchMismatch(int32_t w, int32_t t, int32_t batch_idx);
  [[gnu::cold, gnu::noinline]] void ReportScattered(int32_t w, int32_t t, int32_t earlier);
  void CheckTile(int32_t t);
  // "tile t (batch b, q [q0,q1))" as a fmt argument: formatted only when a finding is reported
  // (CheckTile runs for every tile of every fuzz case).
  TileLabel Label(int32_t t) const {
    const ExpectedTile& e = tiles_[t];
    return {t, e.batch_idx, e.q0, e.q1};
  }
  [[gnu::cold, gnu::noinline]] void CheckTileWithoutWork(int32_t t);
  bool CheckUpdatedEmptyPiece(int32_t t);
  bool CheckTileKv(int32_t t, const Pieces& ws);
  void CheckPieceLength(int32_t t, int32_t w, int32_t k0, int32_t k1, bool last);
  void CheckTileReduce(int32_t t, const Pieces& ws);
  bool CheckReduceGroup(int32_t t, const Pieces& ws, int32_t g0);
  void CheckFinalMapRow(int32_t t, const ExpectedTile& e);
  void CheckReduceIndptr();
  void CheckPartialRows();
  bool PartialRowsQuiet(int64_t logits_rows) const;
  int32_t ExpectedKvOffset(const ExpectedTile& e, int32_t kv_end, bool* known) const;

  const bool warnings_;  // Severity::kWarning diagnostics reported (PlanCheckScope::kAll)
  const PlanRequest& r_;
  const Plan& p_;
  const RevisionRules& rules_;  // r_.revision's (looked up once, not per piece)
  PlanCheckReport report_;
  std::vector<ExpectedTile>& tiles_;
  // Work rows per tile, in work order, as flat lists: tile t's are
  // piece_rows_[piece_begin_[t] .. piece_begin_[t + 1]) (no allocation per tile).
  // (piece_rows_ points into s_.piece_rows, or into s_.work_rows when the pieces are in work order.)
  std::vector<int32_t>& piece_begin_;
  const int32_t* piece_rows_ = nullptr;
  CheckScratch& s_;
  Pieces pieces(int32_t t) const {
    return {piece_rows_ + piece_begin_[t],
            static_cast<size_t>(piece_begin_[t + 1] - piece_begin_[t])};
  }
  int32_t num_works_ = 0;
};

bool Checker::CheckWorkIndptr() {
  const int32_t clusters = p_.derived.num_clusters;
  const Int32Buffer& wi = p_.work_indptr;
  if (wi.size() < int64_t{clusters} + 1) {
    Add(PlanDiag::kWorkIndptrShape, "work_indptr", wi.size(), -1, -1,
        "work_indptr holds " + S(wi.size()) + " entries but the planner uses " + S(clusters) +
            " clusters and needs " + S(clusters + 1));
    return false;
  }
  // The first unwritten entry of [0, clusters]: the first zero cell byte (Cell::kUnwritten).
  static_assert(sizeof(Cell) == 1 && static_cast<int>(Cell::kUnwritten) == 0, "cells are bytes");
  if (const void* hole = std::memchr(wi.cells.data(), 0, static_cast<size_t>(clusters) + 1)) {
    const int32_t c = static_cast<int32_t>(static_cast<const Cell*>(hole) - wi.cells.data());
    Add(PlanDiag::kWorkIndptrShape, "work_indptr", c, -1, -1,
        "work_indptr[" + S(c) + "] was never written");
    return false;
  }
  if (wi.data[0] != 0)
    Add(PlanDiag::kWorkIndptrShape, "work_indptr", 0, -1, -1,
        "work_indptr[0] is " + S(wi.data[0]) + ", not 0");
  // Any decrease at all? (One branch-free pass; the loop below reports each, in order.)
  const int32_t* d = wi.data.data();
  uint32_t decreases = 0;
  for (int32_t c = 0; c < clusters; ++c) decreases |= static_cast<uint32_t>(d[c + 1] < d[c]);
  for (int32_t c = 0; decreases != 0 && c < clusters; ++c) {
    if (wi.data[c + 1] < wi.data[c])
      Add(PlanDiag::kWorkIndptrDecreasing, "work_indptr", c + 1, -1, -1,
          "work_indptr decreases at cluster " + S(c) + ": " + S(wi.data[c]) + " -> " +
              S(wi.data[c + 1]));
  }
  num_works_ = wi.data[clusters];
  const int64_t rows = p_.work_info.rows();
  if (num_works_ > rows) {
    Add(PlanDiag::kWorkCountExceedsSizing, "work_info", num_works_, -1, -1,
        "the plan has " + S(num_works_) + " work items but work_info was sized for " + S(rows) +
            " (get_mla_metadata_info_v1)");
    num_works_ = static_cast<int32_t>(rows);
  }
  if (num_works_ < 0) num_works_ = 0;
  return true;
}

void Checker::CheckBuffersAndInputs() {
  const std::pair<const char*, const Int32Buffer*> bufs[] = {
      {"work_indptr", &p_.work_indptr},
      {"work_info", &p_.work_info},
      {"reduce_indptr", &p_.reduce_indptr},
      {"reduce_final_map", &p_.reduce_final_map},
      {"reduce_partial_map", &p_.reduce_partial_map}};
  for (const auto& [name, b] : bufs) {
    if (b->oob_writes > 0)
      Add(PlanDiag::kBufferOverflow, name, b->first_oob_index, -1, -1,
          std::string("the planner stored ") + S(b->oob_writes) + " element(s) past the end of " +
              name + " (" + S(b->size()) + " elements allocated by get_mla_metadata_info_v1); " +
              "first at index " + S(b->first_oob_index));
  }
  for (const InputViolation& v : p_.input_violations)
    Add(PlanDiag::kInputReadOutOfRange, v.array, v.index, -1, v.work_row,
        "the planner read " + v.array + "[" + S(v.index) + "] but it holds " + S(v.size) +
            " entries" +
            (v.work_row >= 0 ? "; work " + S(v.work_row) + " depends on the value" : ""));
  const int32_t planned = p_.derived.fold_ratio;
  for (size_t i = 0; i < p_.update_fold_ratios.size(); ++i) {
    if (p_.update_fold_ratios[i] != planned)
      Add(PlanDiag::kUpdateFoldMismatch, "work_info", -1, -1, -1,
          "decode_update #" + S(i + 1) + " folded heads by " + S(p_.update_fold_ratios[i]) +
              " but the planner folded by " + S(planned) +
              ": its native-head list differs from the planner's (aiter-mla-metadata.md §9.3), "
              "so each work reads kv_indptr of request batch_idx/" +
              S(p_.update_fold_ratios[i]) + " instead of its own");
  }
}

// The tiles' sorted positions by first q row: position p holds tile tile(p), whose first row is
// q0(p). Tiles in q order are their own sorted list (InOrder); others go through by_q0 (ByQ0).
struct InOrder {
  const ExpectedTile* tiles;
  int32_t q0(size_t p) const { return tiles[p].q0; }
  int32_t tile(size_t p) const { return static_cast<int32_t>(p); }
};
struct ByQ0 {
  const std::pair<int32_t, int32_t>* by_q0;
  int32_t q0(size_t p) const { return by_q0[p].first; }
  int32_t tile(size_t p) const { return by_q0[p].second; }
};

// The tile a work's q rows [q0, q1) name. Non-uniform q lengths can give several tiles one first
// row (a request of q length 0 has the empty range [q0, q0) before the next request's [q0, q1)):
// the work's q end, then its batch_idx, tell them apart.
template <class Order>
class TileFinder {
 public:
  TileFinder(Order order, const std::vector<ExpectedTile>& tiles, bool distinct)
      : order_(order), tiles_(tiles.data()), n_(tiles.size()), distinct_(distinct) {}
  int32_t Find(int32_t q0, int32_t q1, int32_t batch_idx) {
    // The sorted position of the last tile found: works come in tile order, so the next work's
    // tile is most often at it or just after it. A position whose first q row no neighbour
    // shares is the only candidate the search below could visit, so it decides alone.
    for (size_t p = hint_; p < hint_ + 2 && p < n_; ++p) {
      if (order_.q0(p) != q0) continue;
      if (!distinct_ &&
          ((p > 0 && order_.q0(p - 1) == q0) || (p + 1 < n_ && order_.q0(p + 1) == q0)))
        break;  // a shared first row: the search below
      hint_ = p;
      const int32_t t = order_.tile(p);
      return tiles_[t].q1 == q1 ? t : -1;
    }
    size_t lo = 0, len = n_;  // lower bound of q0
    while (len > 0) {
      const size_t half = len / 2;
      if (order_.q0(lo + half) < q0) {
        lo += half + 1;
        len -= half + 1;
      } else {
        len = half;
      }
    }
    if (lo < n_ && order_.q0(lo) == q0) hint_ = lo;
    int32_t found = -1;
    for (size_t p = lo; p < n_ && order_.q0(p) == q0; ++p) {
      const int32_t t = order_.tile(p);
      if (tiles_[t].q1 != q1) continue;
      if (found < 0 || tiles_[t].batch_idx == batch_idx) found = t;
    }
    return found;
  }

 private:
  Order order_;
  const ExpectedTile* tiles_;
  size_t n_;
  bool distinct_;  // no two tiles share a first q row
  size_t hint_ = 0;
};

void Checker::AssignWorks() {
  // Tiles come in q order unless qo_indptr decreases: a sorted list is its own stable sort.
  bool in_order = true, distinct = true;
  for (size_t t = 1; t < tiles_.size(); ++t) {
    in_order &= tiles_[t].q0 >= tiles_[t - 1].q0;
    distinct &= tiles_[t].q0 > tiles_[t - 1].q0;
  }
  if (in_order) {
    AssignWorksWith(TileFinder<InOrder>({tiles_.data()}, tiles_, distinct));
    return;
  }
  // Tiles by first q row, sorted (stable: tile order within a row).
  std::vector<std::pair<int32_t, int32_t>>& by_q0 = s_.by_q0;
  by_q0.resize(tiles_.size());
  for (size_t t = 0; t < tiles_.size(); ++t) by_q0[t] = {tiles_[t].q0, static_cast<int32_t>(t)};
  std::stable_sort(by_q0.begin(), by_q0.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  AssignWorksWith(TileFinder<ByQ0>({by_q0.data()}, tiles_, /*distinct=*/false));
}

template <class Finder>
void Checker::AssignWorksWith(Finder find) {
  const int32_t n_tiles = static_cast<int32_t>(tiles_.size());
  std::vector<int32_t>& tile_of = s_.tile_of;
  tile_of.resize(static_cast<size_t>(num_works_));   // every entry is set below; -1: no tile
  std::vector<int32_t>& last_piece = s_.last_piece;  // the tile's last work row
  last_piece.assign(tiles_.size(), -1);
  piece_begin_.assign(tiles_.size() + 1, 0);
  int32_t last_tile = -1;
  // Whether every work row has a tile and the tiles never decrease in work order: then the
  // pieces of all tiles, in tile order, are the work rows 0, 1, 2, ... (no list to build).
  bool in_work_order = true;
  const Cell* cells = p_.work_info.cells.data();
  // The lists' elements through local pointers and the work count in a local: the loop's int32
  // stores could otherwise alias the checker's own int32 fields, reloaded every row.
  int32_t* const tile_of_p = tile_of.data();
  int32_t* const last_piece_p = last_piece.data();
  int32_t* const pieces_p = piece_begin_.data();
  const int32_t num_works = num_works_;
  for (int32_t w = 0; w < num_works; ++w) {
    tile_of_p[w] = -1;
    // Every field a kernel reads (all but the pad): the row's first seven cells, none 0.
    static_assert(kPad == 7 && kWorkInfoWidth == 8, "a work row is 8 cells, the pad last");
    const uint64_t pad_cell = uint64_t{0xff} << (8 * kPad);  // the pad's cell is not read
    const bool written = !AnyUnwritten8(LoadCells8(cells + int64_t{w} * kWorkInfoWidth) | pad_cell);
    if (!written) {
      in_work_order = false;
      ReportUnwrittenRow(w);
      continue;
    }
    const int32_t q0 = p_.work(w, kQoStart), q1 = p_.work(w, kQoEnd);
    const int32_t batch_idx = p_.work(w, kBatchIdx);
    const int32_t t = find.Find(q0, q1, batch_idx);
    if (t < 0) {
      in_work_order = false;
      ReportOutsideRequest(w, q0, q1);
      continue;
    }
    if (batch_idx != tiles_[t].batch_idx) ReportBatchMismatch(w, t, batch_idx);
    if (last_piece_p[t] >= 0 && last_tile != t) ReportScattered(w, t, last_piece_p[t]);
    in_work_order &= t >= last_tile;
    tile_of_p[w] = t;
    last_piece_p[t] = w;
    ++pieces_p[t + 1];
    last_tile = t;
  }
  for (int32_t t = 0; t < n_tiles; ++t) piece_begin_[t + 1] += piece_begin_[t];
  if (in_work_order) {
    std::vector<int32_t>& rows = s_.work_rows;  // 0, 1, 2, ...: kept between calls
    for (int32_t w = static_cast<int32_t>(rows.size()); w < num_works_; ++w) rows.push_back(w);
    piece_rows_ = rows.data();
    return;
  }
  std::vector<int32_t>& piece_rows = s_.piece_rows;
  piece_rows.assign(static_cast<size_t>(piece_begin_[n_tiles]), 0);
  std::vector<int32_t>& fill = last_piece;  // reused: the next free slot per tile
  for (int32_t t = 0; t < n_tiles; ++t) fill[t] = piece_begin_[t];
  for (int32_t w = 0; w < num_works_; ++w)
    if (tile_of[w] >= 0) piece_rows[fill[tile_of[w]]++] = w;
  piece_rows_ = piece_rows.data();
}

void Checker::ReportUnwrittenRow(int32_t w) {
  Add(PlanDiag::kWorkRowUnwritten, "work_info", w, -1, w,
      fmt::format("work row {} is below work_indptr[num_clusters] but was never written", w));
}

void Checker::ReportOutsideRequest(int32_t w, int32_t q0, int32_t q1) {
  Add(PlanDiag::kWorkOutsideRequest, "work_info", w, -1, w,
      fmt::format("work {} covers q rows {}, which is not a q tile of the request (the batch has "
                  "{} q rows)",
                  w, Rng{q0, q1}, tiles_.empty() ? 0 : tiles_.back().q1));
}

void Checker::ReportBatchMismatch(int32_t w, int32_t t, int32_t batch_idx) {
  Add(PlanDiag::kWorkBatchMismatch, "work_info", w, t, w,
      fmt::format("work {} has batch_idx {}, tile {} belongs to batch {}", w, batch_idx, t,
                  tiles_[t].batch_idx));
}

void Checker::ReportScattered(int32_t w, int32_t t, int32_t earlier) {
  Add(PlanDiag::kTilePiecesScattered, "work_info", w, t, w,
      fmt::format("tile {} has pieces at work {} and {} with other tiles' work in between", t,
                  earlier, w));
}

int32_t Checker::ExpectedKvOffset(const ExpectedTile& e, int32_t kv_end, bool* known) const {
  const RevisionRules& rules = rules_;
  *known = true;
  if (r_.page_size == 1) {
    int32_t off = e.kv_full_end - kv_end;
    if (r_.topk >= 0 && p_.derived.fold_ratio == 1 && rules.sparse_kv_offset_adds_token_tail) {
      const int32_t ori = p_.derived.ori_seqlen_qo;
      off += ori - 1 - e.v % ori;
    }
    return off;
  }
  if (kv_end == e.kv_full_end) return 0;
  const int32_t idx = rules.sparse_batch_idx_is_request ? (r_.topk >= 0 ? e.request : e.v) : e.v;
  if (idx < 0 || idx >= static_cast<int32_t>(r_.kv_last_page_lens.size())) {
    *known = false;
    return 0;
  }
  return (e.kv_full_end - kv_end - 1) * r_.page_size + r_.kv_last_page_lens[idx];
}

// A tile that got no work item: harmless only when it has no KV.
void Checker::CheckTileWithoutWork(int32_t t) {
  const ExpectedTile& e = tiles_[t];
  if (e.kv_full_end == e.kv_begin) {
    if (!warnings_) return;
    Add(PlanDiag::kTileWithoutWork, "work_info", -1, t, -1,
        fmt::format("{} has zero KV and no work item: output rows {} are never written (aiter's "
                    "parallel planner does this; golden README)",
                    Label(t), Rng{e.q0, e.q1}),
        Severity::kWarning);
  } else if (!p_.update_fold_ratios.empty())
    Add(PlanDiag::kUpdateLeftEmptyPiece, "work_info", -1, t, -1,
        fmt::format("{} now has KV {} but no work item: the plan it was updated from gave this "
                    "zero-KV request none, and decode_update only rewrites existing work items",
                    Label(t), Rng{e.kv_begin, e.kv_end}));
  else
    Add(PlanDiag::kTileKvNotCovered, "work_info", -1, t, -1,
        fmt::format("{} has KV {} but no work item covers it", Label(t),
                    Rng{e.kv_begin, e.kv_end}));
}

// decode_update never moves a zero-length last piece (§9.3): a tile that grew keeps it empty.
bool Checker::CheckUpdatedEmptyPiece(int32_t t) {
  const ExpectedTile& e = tiles_[t];
  const Pieces ws = pieces(t);
  if (ws.size() != 1 || p_.update_fold_ratios.empty() || e.kv_end <= e.kv_begin) return false;
  const int32_t k0 = p_.work(ws[0], kKvStart), k1 = p_.work(ws[0], kKvEnd);
  if (k1 != k0) return false;
  Cold([&] {
    Add(PlanDiag::kUpdateLeftEmptyPiece, "work_info", ws[0], t, ws[0],
        fmt::format("{} now has KV {} but its only piece (work {}) is still the empty {}: "
                    "decode_update never moves a zero-length last piece (aiter-mla-metadata.md "
                    "§9.3), so the request's new tokens are not attended",
                    Label(t), Rng{e.kv_begin, e.kv_end}, ws[0], Rng{k0, k1}));
  });
  return true;
}

// Tail rule (§4.5, aiter #2106): with page size 1 every causal q row of a split tile must see at
// least one key in every piece. A tile of n rows needs its final piece to hold >= n tokens and
// every earlier piece to leave >= n tokens after it (aiter enforces max_seqlen_qo, which is n
// for whole-request tiles; a per-token tile, trimmed causally, has n = 1). Called only where the
// rule applies (CheckTileKv: page size 1, a split tile of >= 2 rows, a plan not updated).
void Checker::CheckPieceLength(int32_t t, int32_t w, int32_t k0, int32_t k1, bool last) {
  const ExpectedTile& e = tiles_[t];
  const int32_t rows = e.q1 - e.q0;
  const int32_t after = e.kv_full_end - k1;
  if (last ? k1 - k0 >= rows : after >= rows) return;
  Cold([&] {
    Add(PlanDiag::kPieceShorterThanQlen, "work_info", w, t, w,
        fmt::format("{}: {} {} {} {} tokens, fewer than the tile's {} q rows: causal rows see no "
                    "key in a piece (NaN partials; the tail rule prevents this)",
                    Label(t), last ? "final piece" : "piece", Rng{k0, k1},
                    last ? "holds" : "leaves", last ? k1 - k0 : after, rows));
  });
}

// The pieces of tile t must cover its KV range exactly, in order: piece i must start where the
// previous one ended and, unless final, hold KV; its kv_offset must match. Returns false when a
// piece could not be judged (the tile's reduce bookkeeping is then not checked either; nor are
// the tile's remaining pieces).
bool Checker::CheckTileKv(int32_t t, const Pieces& ws) {
  const ExpectedTile& e = tiles_[t];
  if (warnings_ && e.kv_end <= e.kv_begin && e.kv_full_end > e.kv_begin)
    Cold([&] {
      Add(PlanDiag::kTileEmptyKvRange, "work_info", ws[0], t, ws[0],
          fmt::format("{} has causal KV range {}: the request is shorter than its q rows, which "
                      "see no key",
                      Label(t), Rng{e.kv_begin, e.kv_end}),
          Severity::kWarning);
    });
  // An empty tile served by one empty piece reads no KV wherever the piece points.
  if (ws.size() == 1 && e.kv_end <= e.kv_begin &&
      p_.work(ws[0], kKvEnd) - p_.work(ws[0], kKvStart) == 0)
    return true;
  // The tail rule's scope (CheckPieceLength).
  const bool length_rule =
      r_.page_size == 1 && ws.size() >= 2 && e.q1 - e.q0 >= 2 && p_.update_fold_ratios.empty();
  // ExpectedKvOffset(e, k1) with page size 1: e.kv_full_end - k1 + token_tail.
  const bool page1 = r_.page_size == 1;
  int32_t token_tail = 0;
  if (page1 && r_.topk >= 0 && p_.derived.fold_ratio == 1 &&
      rules_.sparse_kv_offset_adds_token_tail) {
    const int32_t ori = p_.derived.ori_seqlen_qo;
    token_tail = ori - 1 - e.v % ori;
  }
  const int32_t* data = p_.work_info.data.data();
  const Cell* cells = p_.work_info.cells.data();
  const size_t n = ws.size();
  int32_t cursor = e.kv_begin;
  for (size_t i = 0; i < n; ++i) {
    const int32_t w = ws[i];
    const int64_t base = int64_t{w} * kWorkInfoWidth;
    const int32_t k0 = data[base + kKvStart], k1 = data[base + kKvEnd];
    if (cells[base + kKvEnd] == Cell::kUndefined) return false;  // an input violation
    if (k0 != cursor) {
      Cold([&] {
        Add(PlanDiag::kTileKvNotCovered, "work_info", w, t, w,
            fmt::format("{}: piece {} (work {}) starts at {}, expected {}{}", Label(t), i, w, k0,
                        cursor, k0 > cursor ? " (gap)" : " (overlap)"));
      });
      return false;
    }
    if (i + 1 != n && k1 <= k0) {
      Cold([&] {
        Add(PlanDiag::kTileKvNotCovered, "work_info", w, t, w,
            fmt::format("{}: non-final piece {} (work {}) has empty KV {}", Label(t), i, w,
                        Rng{k0, k1}));
      });
      return false;
    }
    bool known = true;
    const int32_t want_off =
        page1 ? e.kv_full_end - k1 + token_tail : ExpectedKvOffset(e, k1, &known);
    const int32_t off = data[base + kKvOffset];
    if (known && cells[base + kKvOffset] != Cell::kUndefined && off != want_off)
      Cold([&] {
        Add(PlanDiag::kKvOffsetMismatch, "work_info", base + kKvOffset, t, w,
            fmt::format("{}: work {} has kv_offset {}, expected {}", Label(t), w, off, want_off));
      });
    if (length_rule) CheckPieceLength(t, w, k0, k1, i + 1 == n);
    cursor = k1;
  }
  if (cursor != e.kv_end)
    Cold([&] {
      Add(PlanDiag::kTileKvNotCovered, "work_info", ws.back(), t, ws.back(),
          fmt::format(
              "{}: pieces end at {}, the tile's KV ends at {}{}", Label(t), cursor, e.kv_end,
              cursor < e.kv_end ? fmt::format(" ({} positions never attended)", e.kv_end - cursor)
                                : std::string(" (reads past the request)")));
    });
  return true;
}

// A split tile's reduce group must list exactly its pieces' partial rows, and its
// reduce_final_map row must be the tile's q rows; an unsplit tile has an empty group.
void Checker::CheckTileReduce(int32_t t, const Pieces& ws) {
  const ExpectedTile& e = tiles_[t];
  const Int32Buffer& ri = p_.reduce_indptr;
  if (int64_t{t} + 1 >= ri.size() || !ri.written(t) || !ri.written(t + 1)) return;  // reported
  // 64-bit: the group's entries of hostile indptr values (-5, INT32_MAX) do not fit in int32.
  const int64_t g0 = ri.data[t], g1 = ri.data[t + 1];
  const int64_t n = static_cast<int64_t>(ws.size());
  if (n == 1) {
    if (g1 != g0)
      Cold([&] {
        Add(PlanDiag::kReduceGroupMismatch, "reduce_indptr", t, t, ws[0],
            fmt::format("{} is not split but its reduce group has {} entries", Label(t), g1 - g0));
      });
    if (p_.work(ws[0], kPartialQoLoc) != -1)
      Cold([&] {
        Add(PlanDiag::kReduceGroupMismatch, "work_info", ws[0], t, ws[0],
            fmt::format("{} is not split but work {} has partial_qo_loc {} (expected -1: write "
                        "final rows)",
                        Label(t), ws[0], p_.work(ws[0], kPartialQoLoc)));
      });
    return;
  }
  if (g1 - g0 != n) {
    Cold([&] {
      Add(PlanDiag::kReduceGroupMismatch, "reduce_indptr", t, t, ws[0],
          fmt::format("{} is split into {} pieces but its reduce group {} has {} entries", Label(t),
                      n, Rng{g0, g1}, g1 - g0));
    });
    return;
  }
  if (!CheckReduceGroup(t, ws, static_cast<int32_t>(g0))) return;
  CheckFinalMapRow(t, e);
}

// reduce_partial_map[g0 + i] must be piece i's partial_qo_loc.
bool Checker::CheckReduceGroup(int32_t t, const Pieces& ws, int32_t g0) {
  const Int32Buffer& pm = p_.reduce_partial_map;
  for (size_t i = 0; i < ws.size(); ++i) {
    const int64_t idx = int64_t{g0} + static_cast<int64_t>(i);
    const int32_t want = p_.work(ws[i], kPartialQoLoc);
    if (want < 0) {
      Cold([&] {
        Add(PlanDiag::kReduceGroupMismatch, "work_info", ws[i], t, ws[i],
            fmt::format("{} is split but work {} has partial_qo_loc -1 (it would write final rows "
                        "that the reduce then overwrites)",
                        Label(t), ws[i]));
      });
      return false;
    }
    const bool held = idx < pm.size() && pm.written(idx);
    if (!held || pm.data[idx] != want) {
      Cold([&] {
        Add(PlanDiag::kReduceGroupMismatch, "reduce_partial_map", idx, t, ws[i],
            fmt::format(
                "{}: reduce_partial_map[{}] is {}, piece {} (work {}) writes partial row {}",
                Label(t), idx, held ? fmt::to_string(pm.data[idx]) : std::string("unwritten"), i,
                ws[i], want));
      });
      return false;
    }
  }
  return true;
}

void Checker::CheckFinalMapRow(int32_t t, const ExpectedTile& e) {
  const Int32Buffer& fm = p_.reduce_final_map;
  const int64_t f = int64_t{t} * kReduceFinalMapWidth;
  const int64_t f0 = f + kFinalQoStart, f1 = f + kFinalQoEnd;
  const bool held = f1 < fm.size() && fm.written(f0) && fm.written(f1);
  if (held && fm.data[f0] == e.q0 && fm.data[f1] == e.q1) return;
  Cold([&] {
    Add(PlanDiag::kReduceFinalMapMismatch, "reduce_final_map", t, t, -1,
        fmt::format("{} is split but reduce_final_map[{}] is {}, expected {}", Label(t), t,
                    held ? fmt::to_string(Rng{fm.data[f0], fm.data[f1]}) : std::string("unwritten"),
                    Rng{e.q0, e.q1}));
  });
}

void Checker::CheckTile(int32_t t) {
  const Pieces ws = pieces(t);
  if (ws.empty()) return CheckTileWithoutWork(t);
  // (Only an updated plan can have one: the call is skipped for every other plan's tiles.)
  if (!p_.update_fold_ratios.empty() && CheckUpdatedEmptyPiece(t)) return;
  if (CheckTileKv(t, ws)) CheckTileReduce(t, ws);
}

void Checker::CheckReduceIndptr() {
  const Int32Buffer& ri = p_.reduce_indptr;
  const int64_t needed = static_cast<int64_t>(tiles_.size()) + 1;
  if (ri.size() < needed) {
    Add(PlanDiag::kReduceIndptrInvalid, "reduce_indptr", ri.size(), -1, -1,
        "reduce_indptr holds " + S(ri.size()) + " entries; the request has " + S(tiles_.size()) +
            " q tiles and needs " + S(needed));
    return;
  }
  // The common plan reports nothing: every entry written, the first 0, no decrease and no step
  // of exactly 1. Scanned in one branch-free pass; anything else takes the loop as written
  // (which then reports what it always did, in its order).
  {
    const int64_t n = ri.size();
    const int32_t* d = ri.data.data();
    const Cell* c = ri.cells.data();
    // (memchr for an unwritten cell, a zero byte; int32 lanes, so that the compiler vectorises
    // the step loop. A step of 1 modulo 2^32 is a step of 1 or a decrease from INT32_MAX to
    // INT32_MIN: a decrease either way.)
    const bool unwritten = std::memchr(c, 0, static_cast<size_t>(n)) != nullptr;  // kUnwritten
    uint32_t bad_step = 0;
    for (int64_t i = 1; i < n; ++i)
      bad_step |= static_cast<uint32_t>(d[i] < d[i - 1]) |
                  static_cast<uint32_t>(
                      static_cast<uint32_t>(d[i]) - static_cast<uint32_t>(d[i - 1]) == 1u);
    if (!unwritten && d[0] == 0 && bad_step == 0) return;
  }
  for (int64_t i = 0; i < ri.size(); ++i) {
    if (!ri.written(i)) {
      Add(PlanDiag::kReduceIndptrInvalid, "reduce_indptr", i, -1, -1,
          "reduce_indptr[" + S(i) + "] was never written (the reducer reads the whole buffer)");
      return;
    }
    if (i == 0 && ri.data[0] != 0)
      Add(PlanDiag::kReduceIndptrInvalid, "reduce_indptr", 0, -1, -1, "reduce_indptr[0] is not 0");
    if (i > 0 && ri.data[i] < ri.data[i - 1]) {
      Add(PlanDiag::kReduceIndptrInvalid, "reduce_indptr", i, static_cast<int32_t>(i - 1), -1,
          "reduce_indptr decreases at " + S(i));
      return;
    }
    if (i > 0 && ri.data[i] - ri.data[i - 1] == 1)
      Add(PlanDiag::kReduceIndptrInvalid, "reduce_indptr", i, static_cast<int32_t>(i - 1), -1,
          "reduce group " + S(i - 1) + " has a single piece (groups are empty or >= 2)");
  }
}

// Whether CheckPartialRows has nothing to report: the partial rows in work order are sorted (by
// first row; works come in order), none starts before the one before it ends, none ends past
// `logits_rows`. One pass over the work rows, no list.
bool Checker::PartialRowsQuiet(int64_t logits_rows) const {
  const int32_t* data = p_.work_info.data.data();
  const Cell* cells = p_.work_info.cells.data();
  int64_t prev_begin = INT64_MIN, prev_end = INT64_MIN;
  for (int32_t w = 0; w < num_works_; ++w) {
    const int64_t base = int64_t{w} * kWorkInfoWidth;
    const int32_t loc = data[base + kPartialQoLoc];
    if (loc < 0 || cells[base + kPartialQoLoc] == Cell::kUnwritten) continue;
    const int64_t begin = loc, end = begin + data[base + kQoEnd] - data[base + kQoStart];
    if (begin < prev_begin || begin < prev_end || end > logits_rows) return false;
    prev_begin = begin;
    prev_end = end;
  }
  return true;
}

void Checker::CheckPartialRows() {
  // mla_decode_fwd allocates logits with reduce_partial_map.size(0) * max_seqlen_q rows (§10).
  const int64_t logits_rows = p_.reduce_partial_map.size() * int64_t{r_.max_seqlen_qo};
  // The common plan reports nothing (PartialRowsQuiet); anything else takes the list below,
  // which then reports what it always did, in its order.
  if (PartialRowsQuiet(logits_rows)) return;
  using Rows = PartialRows;
  std::vector<Rows>& rows = s_.rows;
  rows.clear();
  for (int32_t w = 0; w < num_works_; ++w) {
    const int32_t loc = p_.work(w, kPartialQoLoc);
    if (loc < 0 || !p_.work_info.written(int64_t{w} * kWorkInfoWidth + kPartialQoLoc)) continue;
    rows.push_back({loc, int64_t{loc} + p_.work(w, kQoEnd) - p_.work(w, kQoStart), w});
  }
  // (Planned plans list their partial rows in work order: sorted already, most often. The order
  // is total, works being distinct, so a sorted list is the sort's result.)
  const auto by_rows = [](const Rows& a, const Rows& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.work < b.work;
  };
  if (!std::is_sorted(rows.begin(), rows.end(), by_rows))
    std::sort(rows.begin(), rows.end(), by_rows);
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].begin < rows[i - 1].end)
      Add(PlanDiag::kPartialRowsOverlap, "work_info", rows[i].work, -1, rows[i].work,
          "works " + S(rows[i - 1].work) + " and " + S(rows[i].work) + " share partial rows " +
              Range(rows[i].begin, std::min(rows[i].end, rows[i - 1].end)));
  }
  for (const Rows& x : rows) {
    if (x.end > logits_rows) {
      Add(PlanDiag::kPartialRowsExceedLogits, "logits", x.end - 1, -1, x.work,
          "work " + S(x.work) + " writes partial rows " + Range(x.begin, x.end) +
              " but the partial buffers hold " + S(logits_rows) + " rows");
      break;
    }
  }
}

PlanCheckReport Checker::Run() {
  CheckBuffersAndInputs();
  if (p_.derived.num_clusters <= 0) {
    const int64_t requests = static_cast<int64_t>(r_.kv_indptr.size()) - 1;
    if (requests > 0)
      Add(PlanDiag::kZeroClusters, "work_indptr", -1, -1, -1,
          "the planner has " + S(p_.derived.num_clusters) + " clusters (cu_count " +
              S(r_.cu_count) + " / num_heads_k " + S(r_.num_heads_k) +
              "): no workgroup runs, so none of the " + S(requests) +
              " requests' output rows is ever written");
    return std::move(report_);
  }
  if (!CheckWorkIndptr()) return std::move(report_);
  FillExpectedTiles(r_, p_.derived, tiles_);
  AssignWorks();
  CheckReduceIndptr();
  for (int32_t t = 0; t < static_cast<int32_t>(tiles_.size()); ++t) CheckTile(t);
  CheckPartialRows();
  return std::move(report_);
}

std::string Launch(int64_t workgroups) {
  return "a launch of " + S(workgroups) + (workgroups == 1 ? " workgroup" : " workgroups");
}

// One kind of launch read problem, aggregated over the workgroups that show it.
struct EntryRange {
  int64_t first = -1, last = -1, count = 0;
  void Add(int64_t i) {
    if (count++ == 0) first = i;
    last = i;
  }
  std::string Text() const {
    return count == 1 ? "work_indptr[" + S(first) + "]"
                      : S(count) + " entries, work_indptr[" + S(first) + "] to [" + S(last) + "]";
  }
};

void CheckLaunchReads(const Plan& plan, int64_t workgroups, PlanCheckReport& report) {
  const Int32Buffer& wi = plan.work_indptr;
  EntryRange past, unwritten;
  for (int64_t i = 0; i <= workgroups; ++i) {
    if (i >= wi.size())
      past.Add(i);
    else if (!wi.written(i))
      unwritten.Add(i);
  }
  const std::string launch = Launch(workgroups);
  if (past.count > 0)
    report.diagnostics.push_back(
        {PlanDiag::kLaunchReadsPastBuffer, Severity::kError, "work_indptr", past.first, -1, -1,
         launch + " reads " + past.Text() + " past the end of work_indptr (" + S(wi.size()) +
             " entries): workgroup c reads work_indptr[c] and [c + 1]"});
  if (unwritten.count > 0)
    report.diagnostics.push_back(
        {PlanDiag::kLaunchReadsUnwritten, Severity::kError, "work_indptr", unwritten.first, -1, -1,
         launch + " reads " + unwritten.Text() + ", which no planner wrote (the planner has " +
             S(plan.derived.num_clusters) + " clusters and writes work_indptr[0.." +
             S(plan.derived.num_clusters) + "]): stale memory on a GPU decides which work runs"});
}

void CheckLaunchCoverage(const Plan& plan, int64_t workgroups, PlanCheckReport& report) {
  const int32_t clusters = plan.derived.num_clusters;
  const Int32Buffer& wi = plan.work_indptr;
  if (workgroups >= clusters || clusters >= wi.size()) return;
  if (!wi.written(workgroups) || !wi.written(clusters)) return;  // reported by CheckPlan
  const int32_t lost0 = wi.data[workgroups], lost1 = wi.data[clusters];
  const std::string what = Launch(workgroups) + " leaves clusters " + S(workgroups) + ".." +
                           S(clusters - 1) + " of " + S(clusters) + " without a workgroup";
  if (lost1 > lost0)
    report.diagnostics.push_back(
        {PlanDiag::kLaunchSkipsWork, Severity::kError, "work_indptr", workgroups, -1, lost0,
         what + ": work items " + Range(lost0, lost1) + " never run (their output rows are " +
             "never written, or their partial rows never reduced)"});
  else
    report.diagnostics.push_back({PlanDiag::kLaunchSkipsWork, Severity::kWarning, "work_indptr",
                                  workgroups, -1, -1, what + "; those clusters hold no work"});
}

}  // namespace

int64_t AiterLaunchGrid(const Plan& plan) {
  return plan.work_indptr.size() - 1;
}

PlanCheckReport CheckLaunchGrid(const Plan& plan, int64_t workgroups) {
  MLASIM_ASSERT(workgroups >= 1, "a launch has at least one workgroup");
  MLASIM_ASSERT(plan.work_indptr.tracked(), "CheckLaunchGrid needs CellTracking::kChecked");
  PlanCheckReport report;
  CheckLaunchReads(plan, workgroups, report);
  CheckLaunchCoverage(plan, workgroups, report);
  return report;
}

const char* PlanDiagName(PlanDiag d) {
  return NameOf(kPlanDiagNames, d);
}

const char* SeverityName(Severity s) {
  return NameOf(kSeverityNames, s);
}

bool PlanCheckReport::ok() const {
  for (const PlanDiagnostic& d : diagnostics)
    if (d.severity == Severity::kError) return false;
  return true;
}

int64_t PlanCheckReport::count(PlanDiag code) const {
  return std::count_if(diagnostics.begin(), diagnostics.end(),
                       [code](const PlanDiagnostic& d) { return d.code == code; });
}

std::string PlanCheckReport::ToString() const {
  std::string out;
  for (const PlanDiagnostic& d : diagnostics) {
    out += SeverityName(d.severity);
    out += ' ';
    out += PlanDiagName(d.code);
    out += ": ";
    out += d.message;
    out += "\n";
  }
  return out;
}

std::vector<ExpectedTile> ExpectedTiles(const PlanRequest& r, const PlanDerived& d) {
  std::vector<ExpectedTile> out;
  FillExpectedTiles(r, d, out);
  return out;
}

namespace {
// ExpectedTiles() into `out` (its earlier contents overwritten, its memory reused: the checker
// keeps one between calls).
void FillExpectedTiles(const PlanRequest& r, const PlanDerived& d, std::vector<ExpectedTile>& out) {
  const RevisionRules& rules = GetRevisionRules(r.revision);
  const bool sparse = r.topk >= 0;
  const int32_t fold = d.fold_ratio;
  const int32_t requests = static_cast<int32_t>(r.kv_indptr.size()) - 1;
  const int32_t ori = sparse ? d.ori_seqlen_qo : r.uni_seqlen_qo;
  const int32_t nb = sparse ? requests * fold * ori : requests * fold;
  const int32_t uni = r.uni_seqlen_qo;
  // Non-uniform q lengths: request v's rows from qo_indptr (the planner refuses folding here).
  const bool ragged = uni < 1 && !sparse && static_cast<int32_t>(r.qo_indptr.size()) > nb;
  int32_t n_tiles = 1;
  if (d.qo_split && !ragged)
    n_tiles = d.planner_heads * 2 > d.packed_qo_len_per_wg
                  ? uni
                  : CeilDiv(uni * d.planner_heads, d.packed_qo_len_per_wg);
  const int32_t qts = ragged ? 0 : CeilDiv(uni, n_tiles);
  const int32_t topk_p = sparse ? CeilDiv(r.topk, r.page_size) : -1;
  out.reserve(static_cast<size_t>(nb) * n_tiles);
  // Written in place, every field of every tile, with the request's fields read once into locals:
  // stores through ExpectedTile could alias them, and would reload each per tile.
  out.resize(nb > 0 && n_tiles > 0 ? static_cast<size_t>(nb) * n_tiles : 0);
  ExpectedTile* o = out.data();
  const int32_t* kv_indptr = r.kv_indptr.data();
  const int32_t* qo_indptr = r.qo_indptr.data();
  const bool batch_is_request = sparse && rules.sparse_batch_idx_is_request;
  const bool page1 = r.page_size == 1;
  const bool cp_round_robin = r.is_cp_round_robin;
  const bool fold_trim = !sparse && fold != 1;
  const bool no_trim = rules.causal_trim_needs_is_causal && !r.is_causal;
  for (int32_t v = 0; v < nb; ++v) {
    const int32_t b = sparse ? v / ori / fold : v / fold;
    int32_t len = kv_indptr[b + 1] - kv_indptr[b];
    int32_t kb;
    if (sparse) {
      len = std::min(len, topk_p);
      kb = (v / fold) * topk_p;
    } else {
      kb = kv_indptr[b] - kv_indptr[0];
    }
    const int32_t batch_idx = batch_is_request ? b : v;
    for (int32_t t = 0; t < n_tiles; ++t) {
      ExpectedTile& e = *o++;
      e.v = v;
      e.tile = t;
      e.request = b;
      e.batch_idx = batch_idx;
      if (ragged) {  // one tile of the request's rows (DecidePlan refuses q splits here)
        e.q0 = qo_indptr[v];
        e.q1 = qo_indptr[v + 1];
      } else {
        e.q0 = uni * v + t * qts;
        e.q1 = std::min(e.q0 + qts, uni * v + uni);
      }
      e.kv_begin = kb;
      e.kv_full_end = kb + len;
      int32_t bt = 0;
      if (page1) {
        bt = cp_round_robin ? 0 : n_tiles - 1 - t;
        if (fold_trim) bt = n_tiles - (e.q0 / fold) % ori - 1;
        bt = std::max(bt, 0);
        if (no_trim) bt = 0;
      }
      e.kv_end = e.kv_full_end - bt;
    }
  }
}
}  // namespace

PlanCheckReport CheckPlan(const PlanRequest& request, const Plan& plan, PlanCheckScope scope) {
  for (PlanBufferId id : kInt32PlanBuffers)
    MLASIM_ASSERT(plan.buffer(id)->tracked(),
                  "CheckPlan needs a plan made with CellTracking::kChecked (the write state)");
  thread_local CheckScratch scratch;
  return Checker(request, plan, scratch, scope == PlanCheckScope::kAll).Run();
}

}  // namespace mlasim::ref
