// The plan buffers' write state as the executor marks it in the address space (run by run:
// sim/executor.cpp MarkPlanWrites): a kernel that reads every row of work_info reads stale
// memory in exactly the rows with an unwritten cell, wherever the unwritten cells fall (first
// element, last element of a row, a whole row, across eight-cell words, the unused tail).
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sim/contract.h"
#include "sim/engine.h"
#include "sim/executor.h"
#include "sim_builders.h"

namespace mlasim::sim {
namespace {

using nlohmann::json;

TEST(PlanWrites, AKernelReadingEveryRowFindsExactlyTheRowsWithAnUnwrittenCell) {
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
  // Unwritten cells: element 0, the last element of row 2, all of row 4, elements 63 and 64
  // (rows 7 and 8, on both sides of an eight-cell word), and whatever the planner left unwritten.
  const std::vector<int64_t> holes = {0, 2 * 8 + 7, 32, 33, 34, 35, 36, 37, 38, 39, 63, 64};
  Trace t = *planned;
  for (PlanSnapshot& p : t.plans)
    for (int64_t e : holes) p.plan.work_info.cells.at(e) = ref::Cell::kUnwritten;
  const ExecutionResult r = Execute(s, t);
  const Call* decode = nullptr;
  for (const Call& c : t.calls)
    if (c.kind == CallKind::kDecode && !decode) decode = &c;
  ASSERT_NE(decode, nullptr);
  const ref::Int32Buffer& info = t.plans[decode->plan].plan.work_info;
  std::vector<int32_t> want;
  for (int64_t row = 0; row < info.size() / 8; ++row) {
    bool hole = false;
    for (int64_t e = row * 8; e < row * 8 + 8; ++e) hole = hole || info.cells[e] == ref::Cell::kUnwritten;
    if (hole) want.push_back(static_cast<int32_t>(row));
  }
  ASSERT_GE(want.size(), 6u);
  EXPECT_EQ(std::vector<int32_t>(want.begin(), want.begin() + 5),
            (std::vector<int32_t>{0, 2, 4, 7, 8}));
  const Violation* stale = nullptr;
  for (const Violation& v : r.violations)
    if (v.call_index == decode->index && v.kind == ViolationKind::kUninitializedRead &&
        v.buffer == t.plans[decode->plan].buffer_prefix + "work_info")
      stale = &v;
  ASSERT_NE(stale, nullptr);
  EXPECT_EQ(stale->work_items, want);
  EXPECT_EQ(stale->first_row, 0);
  EXPECT_EQ(stale->last_row, want.back());
}

}  // namespace
}  // namespace mlasim::sim
