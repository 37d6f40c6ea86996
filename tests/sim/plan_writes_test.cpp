// The plan buffers' write state as the executor marks it in the address space (run by run:
// sim/executor.cpp MarkPlanWrites): a kernel that reads every row of work_info reads stale
// memory in exactly the rows with an unwritten cell, wherever the unwritten cells fall (first
// element, last element of a row, a whole row, across eight-cell words, the unused tail).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sim/contract.h"
#include "sim/engine.h"
#include "sim/executor.h"
#include "sim/memory.h"
#include "sim_builders.h"

namespace mlasim::sim {
namespace {

using nlohmann::json;

// Runs a kernel that reads every row of work_info over the worked example with the cells
// `holes` unwritten; returns the rows the planner and the holes left with an unwritten cell
// (`want`) and the work items of the stale-read finding (`got`).
void ReadEveryRow(const std::vector<int64_t>& holes, std::vector<int32_t>* want,
                  std::vector<int32_t>* got) {
  auto reader = ParseContract(json::parse(R"({
      "contract": 1, "name": "rows", "call": "decode", "variant": "rows", "source": "test",
      "launch": {"grid": "work_info_rows"},
      "program": [{"loop": "r", "from": 0, "to": "grid", "attribute": "work_item", "body": [
        {"read": "work_info", "rows": ["r", "r + 1"]}]}]})"),
                              "rows.json");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  Scenario s = test::WorkedExample(true, "atom-2026-08");
  s.contracts.push_back(std::make_shared<const Contract>(std::move(*reader)));
  auto planned = ExpandStep(s);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  Trace t = *planned;
  for (PlanSnapshot& p : t.plans)
    for (int64_t e : holes) p.plan.work_info.cells.at(e) = ref::Cell::kUnwritten;
  const ExecutionResult r = Execute(s, t);
  const Call* decode = nullptr;
  for (const Call& c : t.calls)
    if (c.kind == CallKind::kDecode && !decode) decode = &c;
  ASSERT_NE(decode, nullptr);
  const ref::Int32Buffer& info = t.plans[decode->plan].plan.work_info;
  for (int64_t row = 0; row < info.size() / 8; ++row) {
    bool hole = false;
    for (int64_t e = row * 8; e < row * 8 + 8; ++e) hole = hole || info.cells[e] == ref::Cell::kUnwritten;
    if (hole) want->push_back(static_cast<int32_t>(row));
  }
  const Violation* stale = nullptr;
  for (const Violation& v : r.violations)
    if (v.call_index == decode->index && v.kind == ViolationKind::kUninitializedRead &&
        v.buffer == t.plans[decode->plan].buffer_prefix + "work_info")
      stale = &v;
  ASSERT_NE(stale, nullptr);
  *got = stale->work_items;
  EXPECT_EQ(stale->first_row, want->front());
  EXPECT_EQ(stale->last_row, want->back());
}

TEST(PlanWrites, AKernelReadingEveryRowFindsExactlyTheRowsWithAnUnwrittenCell) {
  // Unwritten cells: element 0, the last element of row 2, all of row 4, elements 63 and 64
  // (rows 7 and 8, on both sides of an eight-cell word), and whatever the planner left unwritten.
  const std::vector<int64_t> holes = {0, 2 * 8 + 7, 32, 33, 34, 35, 36, 37, 38, 39, 63, 64};
  std::vector<int32_t> want, got;
  ReadEveryRow(holes, &want, &got);
  ASSERT_GE(want.size(), 6u);
  EXPECT_EQ(std::vector<int32_t>(want.begin(), want.begin() + 5),
            (std::vector<int32_t>{0, 2, 4, 7, 8}));
  EXPECT_EQ(got, want);
}

// Unwritten stretches are skipped 32 cells at a time: rows 8-10 unwritten (cells [64, 88)) and
// row 11 written, the last eight cells of a 32-cell block; rows 12-15 unwritten, a whole block.
TEST(PlanWrites, RowsAfterALongUnwrittenStretchAreWritten) {
  std::vector<int64_t> holes;
  for (int64_t e = 64; e < 88; ++e) holes.push_back(e);
  for (int64_t e = 96; e < 128; ++e) holes.push_back(e);
  std::vector<int32_t> want, got;
  ReadEveryRow(holes, &want, &got);
  ASSERT_GE(want.size(), 7u);
  EXPECT_EQ(std::vector<int32_t>(want.begin(), want.begin() + 7),
            (std::vector<int32_t>{8, 9, 10, 12, 13, 14, 15}));
  EXPECT_EQ(got, want);
}

// The decode's row of work_info lets (one LetRow) loads its six fields at once when every
// field's cell is written; a work row with one of them unwritten is a stale read of that row,
// whichever field it is (the built-in asm contract, compiled and interpreted).
TEST(PlanWrites, AWorkRowWithOneUnwrittenFieldIsAStaleReadOfThatRow) {
  Scenario s = test::WorkedExample(false, "atom-2026-11");
  auto planned = ExpandStep(s);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  for (const bool flat : {true, false}) {
    for (int32_t field = 1; field < 7; ++field) {  // the lets' fields (batch_idx is loaded alone)
      Trace t = *planned;
      const Call* decode = nullptr;
      for (const Call& c : t.calls)
        if (c.kind == CallKind::kDecode && !decode) decode = &c;
      ASSERT_NE(decode, nullptr);
      PlanSnapshot& snap = t.plans[decode->plan];
      ASSERT_GE(snap.plan.derived.num_works, 2);
      snap.plan.work_info.cells.at(1 * 8 + field) = ref::Cell::kUnwritten;  // work 1
      ExecuteOptions opt;
      opt.flat = flat;
      const ExecutionResult r = Execute(s, t, opt);
      const Violation* stale = nullptr;
      for (const Violation& v : r.violations)
        if (v.call_index == decode->index && v.kind == ViolationKind::kUninitializedRead &&
            v.buffer == snap.buffer_prefix + "work_info")
          stale = &v;
      ASSERT_NE(stale, nullptr) << "field " << field << (flat ? ", compiled" : ", interpreted");
      EXPECT_EQ(stale->first_row, 1) << "field " << field;
      EXPECT_EQ(stale->last_row, 1) << "field " << field;
      EXPECT_EQ(stale->work_items, std::vector<int32_t>{1}) << "field " << field;
    }
  }
}

// The written bytes of an allocation (IntervalSet): rows written in order take a fast path
// (a new last span, or the last span grown); the set must be what the general merge gives. A
// bitmap is the model: after every Add, the first gap of [b, 64) and of [0, e) for every b and e.
// The rows a set leaves incomplete (ForEachRowNotCovered, the unwritten-output report's walk,
// gap by gap) are those a bitmap leaves incomplete: in order, each once, for rows of 1 to 9
// bytes over random sets, and at the edges: a gap ending inside a row, a written island inside
// one row (two gaps meeting it), nothing written, everything written.
TEST(WrittenBytes, RowsNotCoveredAreTheRowsABitmapLeavesIncomplete) {
  constexpr int kBytes = 64;
  const auto rows_of = [](const IntervalSet& set, int64_t rows, int64_t row_bytes) {
    std::vector<int64_t> out;
    set.ForEachRowNotCovered(rows, row_bytes, [&](int64_t r) { out.push_back(r); });
    return out;
  };
  std::mt19937 rng(11);
  for (int round = 0; round < 400; ++round) {
    IntervalSet set;
    std::vector<bool> bit(kBytes, false);
    for (int step = 0, n = static_cast<int>(rng() % 6); step < n; ++step) {
      const int64_t b = static_cast<int64_t>(rng() % kBytes);
      const int64_t e = std::min<int64_t>(kBytes, b + static_cast<int64_t>(rng() % 20));
      set.Add(b, e);
      for (int64_t x = b; x < e; ++x) bit[x] = true;
    }
    const int64_t row_bytes = 1 + static_cast<int64_t>(rng() % 9);
    const int64_t rows = static_cast<int64_t>(rng() % (kBytes / row_bytes + 1));
    std::vector<int64_t> want;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t x = r * row_bytes; x < (r + 1) * row_bytes; ++x)
        if (!bit[x]) {
          want.push_back(r);
          break;
        }
    EXPECT_EQ(rows_of(set, rows, row_bytes), want) << "round " << round;
  }
  IntervalSet set;
  EXPECT_EQ(rows_of(set, 3, 4), (std::vector<int64_t>{0, 1, 2}));
  set.Add(0, 6);  // row 1 half written: the gap [6, 10) ends inside row 2
  set.Add(10, 16);
  set.Add(17, 18);  // an island in row 4: gaps [16, 17) and [18, 20) both meet it
  set.Add(20, 28);
  EXPECT_EQ(rows_of(set, 7, 4), (std::vector<int64_t>{1, 2, 4}));
  set.Add(0, 28);
  EXPECT_TRUE(rows_of(set, 7, 4).empty());
}

TEST(WrittenBytes, AddsInOrderAndOutOfOrderGiveTheSetABitmapGives) {
  constexpr int kBytes = 64;
  std::mt19937 rng(7);
  int64_t in_order = 0;
  for (int round = 0; round < 300; ++round) {
    IntervalSet set;
    std::vector<bool> bit(kBytes, false);
    int64_t last_end = 0;
    for (int step = 0; step < 24; ++step) {
      int64_t b, e;
      if (rng() % 2) {  // at or just before the end of what was written last
        b = std::max<int64_t>(0, last_end - static_cast<int64_t>(rng() % 4));
        e = b + static_cast<int64_t>(rng() % 6);
        ++in_order;
      } else {
        b = static_cast<int64_t>(rng() % kBytes);
        e = b + static_cast<int64_t>(rng() % 12) - 2;  // empty ranges too
      }
      e = std::min<int64_t>(e, kBytes);
      set.Add(b, e);
      for (int64_t x = b; x < e; ++x) bit[x] = true;
      if (e > b) last_end = e;
      auto gap = [&](int64_t lo, int64_t hi) -> std::pair<int64_t, int64_t> {
        int64_t x = lo;
        while (x < hi && bit[x]) ++x;
        if (x >= hi) return {hi, hi};
        int64_t y = x;
        while (y < hi && !bit[y]) ++y;
        return {x, y};
      };
      for (int64_t lo = 0; lo < kBytes; ++lo)
        ASSERT_EQ(set.FirstGap(lo, kBytes), gap(lo, kBytes)) << "round " << round << " step " << step;
      for (int64_t hi = 1; hi <= kBytes; ++hi) {
        ASSERT_EQ(set.FirstGap(0, hi), gap(0, hi)) << "round " << round << " step " << step;
        ASSERT_EQ(set.Covers(0, hi), gap(0, hi).first == hi);
      }
    }
  }
  EXPECT_GT(in_order, 3000);
}

}  // namespace
}  // namespace mlasim::sim
