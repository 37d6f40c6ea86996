#include "ref/flashmla/check.h"

#include <fmt/format.h>

#include <algorithm>

#include "ref/flashmla/sizing.h"

namespace mlasim::ref::flashmla {
namespace {

// ku::ceil / cute::ceil_div with C++ truncating division, as the kernels compute them.
int32_t CeilDiv(int32_t a, int32_t b) {
  return (a + b - 1) / b;
}

// One request's share of one row, as the split-KV kernel decodes it.
struct Piece {
  int32_t row = 0;
  int32_t start = 0;  // first block (inclusive)
  int32_t end = 0;    // block past the last (exclusive)
  int32_t split_idx = 0;
  bool no_split = false;
};

struct Checker {
  const SchedInput& in;
  const SchedMeta& plan;
  SchedCheckLimits limits;
  std::vector<int32_t> blocks;
  bool num_splits_ok = false;
  SchedCheckReport report;

  void Add(SchedDiag code, int32_t row, int32_t request, std::string message) {
    report.diagnostics.push_back({code, row, request, std::move(message)});
  }
  Piece MakePiece(int32_t r, const SchedRow& row, int32_t batch) const;
  std::vector<std::vector<Piece>> CollectPieces();
  void CheckNumSplits();
  void CheckPieces(int32_t request, const std::vector<Piece>& pieces);
  void CheckSplitCount(int32_t request, int32_t pieces);
};

Piece Checker::MakePiece(int32_t r, const SchedRow& row, int32_t batch) const {
  const bool first = batch == row.begin_req_idx;
  const bool last = batch == row.end_req_idx;
  Piece p;
  p.row = r;
  p.split_idx = first ? row.begin_split_idx : 0;
  if (in.revision == Revision::k414a2f3) {  // positions in tokens
    p.start = first ? row.begin_pos / in.block_size_n : 0;
    p.end = last ? CeilDiv(row.end_pos, in.block_size_n) : blocks[batch];
    p.no_split = p.start == 0 && p.end == blocks[batch];
  } else {
    p.start = first ? row.begin_pos : 0;
    p.end = last ? row.end_pos : blocks[batch];
    p.no_split = first ? !row.is_first_req_splitted : (last ? !row.is_last_req_splitted : true);
  }
  return p;
}

std::vector<std::vector<Piece>> Checker::CollectPieces() {
  const int32_t b = in.batch_size;
  std::vector<std::vector<Piece>> pieces(b);
  for (int32_t r = 0; r < static_cast<int32_t>(plan.rows.size()); ++r) {
    const SchedRow& row = plan.rows[r];
    if (row.begin_req_idx >= b) continue;  // the kernel returns at once
    if (row.begin_req_idx < 0 || row.end_req_idx >= b || row.end_req_idx < row.begin_req_idx) {
      Add(SchedDiag::kRowRequestRange, r, -1,
          fmt::format("row {} decodes requests [{}, {}] of a batch of {}", r, row.begin_req_idx,
                      row.end_req_idx, b));
      continue;
    }
    for (int32_t batch = row.begin_req_idx; batch <= row.end_req_idx; ++batch)
      pieces[batch].push_back(MakePiece(r, row, batch));
  }
  return pieces;
}

void Checker::CheckNumSplits() {
  const auto& ns = plan.num_splits;
  const int32_t b = in.batch_size;
  if (static_cast<int32_t>(ns.size()) != b + 1 || ns[0] != 0) {
    Add(SchedDiag::kNumSplitsShape, -1, -1,
        fmt::format("num_splits has {} entries starting at {}, expected {} starting at 0",
                    ns.size(), ns.empty() ? 0 : ns[0], b + 1));
    return;
  }
  num_splits_ok = true;
  for (int32_t r = 0; r < b; ++r) {
    if (ns[r + 1] <= ns[r])
      Add(SchedDiag::kNumSplitsNotIncreasing, -1, r,
          fmt::format("num_splits[{}] = {} <= num_splits[{}] = {}: request {} owns no split", r + 1,
                      ns[r + 1], r, ns[r], r));
  }
}

void Checker::CheckPieces(int32_t request, const std::vector<Piece>& pieces) {
  const int32_t k = static_cast<int32_t>(pieces.size());
  int32_t expected = 0;
  for (int32_t j = 0; j < k; ++j) {
    const Piece& p = pieces[j];
    if (p.start != expected)
      Add(SchedDiag::kPieceGapOrOverlap, p.row, request,
          fmt::format("piece {} of request {} starts at block {}, the previous ended at {}", j,
                      request, p.start, expected));
    if (p.end > blocks[request] || p.start < 0)
      Add(SchedDiag::kPiecePastRange, p.row, request,
          fmt::format("piece {} of request {} reads blocks [{}, {}), the request has {}", j,
                      request, p.start, p.end, blocks[request]));
    else if (p.start >= p.end && blocks[request] > 0)
      Add(SchedDiag::kEmptyPiece, p.row, request,
          fmt::format("piece {} of request {} covers blocks [{}, {}): nothing", j, request, p.start,
                      p.end));
    expected = p.end;
    if (p.split_idx != j)
      Add(SchedDiag::kSplitIndexMismatch, p.row, request,
          fmt::format("piece {} of request {} has split index {}", j, request, p.split_idx));
    if (p.no_split != (k == 1))
      Add(SchedDiag::kSplitFlagMismatch, p.row, request,
          fmt::format("piece {} of request {} is decoded as {} but the request has {} pieces", j,
                      request, p.no_split ? "no-split" : "split", k));
    if (!p.no_split && num_splits_ok) {
      const int64_t acc = int64_t{plan.num_splits[request]} + p.split_idx;
      if (acc < 0 || acc >= limits.accum_rows)
        Add(SchedDiag::kSplitsExceedAccum, p.row, request,
            fmt::format("piece {} of request {} writes accumulator row {}, {} rows exist", j,
                        request, acc, limits.accum_rows));
    }
  }
  if (k == 0)
    Add(SchedDiag::kRequestNotConsumed, -1, request,
        fmt::format("no row decodes request {} ({} blocks)", request, blocks[request]));
  else if (expected < blocks[request])
    Add(SchedDiag::kRequestNotConsumed, pieces.back().row, request,
        fmt::format("request {} is decoded up to block {} of {}", request, expected,
                    blocks[request]));
}

void Checker::CheckSplitCount(int32_t request, int32_t pieces) {
  if (!num_splits_ok) return;
  const int32_t count = plan.num_splits[request + 1] - plan.num_splits[request];
  if (pieces > 0 && count != pieces)
    Add(SchedDiag::kSplitCountMismatch, -1, request,
        fmt::format("request {} has {} pieces but num_splits gives it {} splits", request, pieces,
                    count));
  if (count > limits.combine_max_splits)
    Add(SchedDiag::kSplitsExceedCombine, -1, request,
        fmt::format("request {} has {} splits, the combine kernel merges at most {}", request,
                    count, limits.combine_max_splits));
  if (count > 1 && plan.num_splits[request + 1] > limits.accum_rows)
    Add(SchedDiag::kSplitsExceedAccum, -1, request,
        fmt::format("the combine reads accumulator rows [{}, {}) of request {}, {} rows exist",
                    plan.num_splits[request], plan.num_splits[request + 1], request,
                    limits.accum_rows));
}

}  // namespace

const char* SchedDiagName(SchedDiag d) {
  switch (d) {
    case SchedDiag::kRowCount: return "RowCount";
    case SchedDiag::kNumSplitsShape: return "NumSplitsShape";
    case SchedDiag::kNumSplitsNotIncreasing: return "NumSplitsNotIncreasing";
    case SchedDiag::kRowRequestRange: return "RowRequestRange";
    case SchedDiag::kRequestNotConsumed: return "RequestNotConsumed";
    case SchedDiag::kPieceGapOrOverlap: return "PieceGapOrOverlap";
    case SchedDiag::kPiecePastRange: return "PiecePastRange";
    case SchedDiag::kEmptyPiece: return "EmptyPiece";
    case SchedDiag::kSplitCountMismatch: return "SplitCountMismatch";
    case SchedDiag::kSplitIndexMismatch: return "SplitIndexMismatch";
    case SchedDiag::kSplitFlagMismatch: return "SplitFlagMismatch";
    case SchedDiag::kSplitsExceedAccum: return "SplitsExceedAccum";
    case SchedDiag::kSplitsExceedCombine: return "SplitsExceedCombine";
  }
  return "Unknown";
}

int64_t SchedCheckReport::count(SchedDiag code) const {
  return std::count_if(diagnostics.begin(), diagnostics.end(),
                       [&](const SchedDiagnostic& d) { return d.code == code; });
}

std::string SchedCheckReport::ToString() const {
  std::string out;
  for (const SchedDiagnostic& d : diagnostics)
    out += fmt::format("{} (row {}, request {}): {}\n", SchedDiagName(d.code), d.row, d.request,
                       d.message);
  return out;
}

std::vector<int32_t> ConsumerBlocks(const SchedInput& in) {
  std::vector<int32_t> blocks(in.batch_size);
  for (int32_t r = 0; r < in.batch_size; ++r) {
    if (in.topk == -1) {
      blocks[r] = CeilDiv(in.seqlens_k[r], in.block_size_n);
      continue;
    }
    const int32_t tl = in.topk_length.empty() ? in.topk : in.topk_length[r];
    const int32_t el = in.extra_topk_length.empty() ? in.extra_topk : in.extra_topk_length[r];
    // sparse_fp8/splitkv_mla.cuh: max(ceil(tl, 64), 64) + ceil(el, 64), in blocks; ceil(-1) = 0
    blocks[r] = std::max(CeilDiv(tl, in.block_size_n), 1) + CeilDiv(el, in.block_size_n);
  }
  return blocks;
}

SchedCheckReport CheckSchedMeta(const SchedInput& in, const SchedMeta& plan,
                                const SchedCheckLimits& limits) {
  const Status valid = ValidateSchedInput(in);
  MLASIM_ASSERT(valid.ok(), valid.ToString());
  Checker c{in, plan, limits, ConsumerBlocks(in), false, {}};
  if (c.limits.accum_rows == 0) c.limits.accum_rows = in.batch_size + in.num_sm_parts;
  if (c.limits.combine_max_splits == 0) {
    const auto bucket = CombineMaxSplits(in.num_sm_parts);
    c.limits.combine_max_splits = bucket.ok() ? *bucket : kCombineMaxSplits;
  }
  if (static_cast<int32_t>(plan.rows.size()) != in.num_sm_parts)
    c.Add(SchedDiag::kRowCount, -1, -1,
          fmt::format("{} rows, num_sm_parts is {}", plan.rows.size(), in.num_sm_parts));
  c.CheckNumSplits();
  const auto pieces = c.CollectPieces();
  for (int32_t r = 0; r < in.batch_size; ++r) {
    c.CheckPieces(r, pieces[r]);
    c.CheckSplitCount(r, static_cast<int32_t>(pieces[r].size()));
  }
  return c.report;
}

}  // namespace mlasim::ref::flashmla
