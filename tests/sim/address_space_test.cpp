// The address space (sim/memory.h) as Execute lends it: one per thread, Reset between steps and
// BeginCall between calls, its dropped allocations' memory reused. A reused space must place,
// name and mark every allocation exactly as a fresh one does.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "sim/fault.h"
#include "sim/memory.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/scenario_json.h"

namespace mlasim::sim {
namespace {

TensorShape Shape(int64_t rows, int64_t row_bytes, const char* dtype) {
  TensorShape s;
  s.rows = rows;
  s.row_bytes = row_bytes;
  s.dtype = dtype;
  return s;
}

// The written bytes of every allocation, as [begin, end) spans found through FirstGap.
std::vector<std::vector<int64_t>> WrittenSpans(const AddressSpace& as) {
  std::vector<std::vector<int64_t>> out;
  for (const Allocation& a : as.allocations()) {
    std::vector<int64_t> spans;
    int64_t at = 0;
    while (at < a.bytes) {
      const auto [gap_begin, gap_end] = a.written.FirstGap(at, a.bytes);
      if (gap_begin > at) spans.insert(spans.end(), {at, gap_begin});
      at = gap_end;
    }
    out.push_back(spans);
  }
  return out;
}

// A step's allocations: persistent buffers (one name longer than a short string's buffer),
// bytes written, a call's transients, a second call's transients.
void RunStep(AddressSpace& as, int32_t variant) {
  as.Allocate("kv_indices", Shape(100 + variant, 4, "int32"));
  as.Allocate("sparse_mtp_reduce_partial_map", Shape(33, 4, "int32"));
  as.FindMutable("kv_indices")->written.Add(0, 40);
  as.BeginCall();
  as.AllocateTransient("q", Shape(8, 1152, "bf16"));
  as.AllocateTransient("attn_lse_of_a_long_transient", Shape(8, 64, "fp32"));
  as.FindMutable("attn_lse_of_a_long_transient")->written.Add(64, 128 + variant);
  as.BeginCall();
  as.AllocateTransient("o", Shape(8 + variant, 1024, "bf16"));
}

TEST(AddressSpace, AResetSpacePlacesNamesAndMarksAsAFreshOne) {
  AllocatorSpec exact;
  AllocatorSpec caching;
  caching.model = AllocatorModel::kCaching;
  caching.segment_bytes = 8192;
  for (const AllocatorSpec* spec : {&exact, &caching})
    for (const AllocatorSpec* before : {&exact, &caching}) {
      AddressSpace fresh(*spec);
      RunStep(fresh, 0);
      // The reused space ran a larger step first (under either model): more allocations, other
      // names, bytes written where the fresh step writes none, segments opened.
      AddressSpace reused(*before);
      RunStep(reused, 5);
      reused.AllocateTransient("logits", Shape(4, 4096, "fp32"));
      reused.FindMutable("logits")->written.Add(0, 4 * 4096);
      reused.Reset(*spec);
      EXPECT_TRUE(reused.allocations().empty());
      RunStep(reused, 0);
      EXPECT_EQ(reused.LayoutJson().dump(), fresh.LayoutJson().dump());
      EXPECT_EQ(WrittenSpans(reused), WrittenSpans(fresh));
      const std::vector<std::vector<int64_t>> want = {{0, 40}, {}, {}};
      EXPECT_EQ(WrittenSpans(reused), want);
    }
}

// BeginCall drops the transients wherever they sit and keeps the persistent allocations in
// their order (one made after a transient included); a transient placed from a dropped one's
// memory starts with nothing written.
TEST(AddressSpace, BeginCallKeepsThePersistentOrderAndRecyclesTransientsUnwritten) {
  AddressSpace as(AllocatorSpec{});
  as.Allocate("work_indptr", Shape(305, 4, "int32"));
  as.AllocateTransient("q", Shape(2, 1152, "bf16"));
  as.FindMutable("q")->written.Add(0, 2304);
  as.Allocate("late_persistent", Shape(3, 4, "int32"));
  as.AllocateTransient("o", Shape(2, 1024, "bf16"));
  as.FindMutable("o")->written.Add(0, 2048);
  as.Allocate("last_persistent", Shape(1, 4, "int32"));
  as.BeginCall();
  std::vector<std::string> names;
  for (const Allocation& a : as.allocations()) names.push_back(a.name);
  EXPECT_EQ(names, (std::vector<std::string>{"work_indptr", "late_persistent", "last_persistent"}));
  as.AllocateTransient("q", Shape(2, 1152, "bf16"));
  as.AllocateTransient("o", Shape(2, 1024, "bf16"));
  const Allocation* q = as.Find("q");
  const Allocation* o = as.Find("o");
  ASSERT_NE(q, nullptr);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(q->written.FirstGap(0, 2304), std::make_pair(int64_t{0}, int64_t{2304}));
  EXPECT_EQ(o->written.FirstGap(0, 2048), std::make_pair(int64_t{0}, int64_t{2048}));
  EXPECT_EQ(q->dtype, "bf16");
  EXPECT_EQ(q->bytes, 2304);
}

// Execute lends each thread's address space and plan tensors from one step to the next: a step
// replayed after other steps (other plans, other buffer names and sizes) reports exactly what it
// reports on a thread that never ran one. The steps: the bug cases of tests/cases (every bug
// class, plans of every dialect and size), one after another, in two orders.
// A kernel's view allocated as flat bytes (executor.cpp AllocateTensors: row_bytes 1 with the
// view's heads and cols) is written without heads, cols and elem_bytes: its rows are bytes, and
// a row of 16 x 512 x 2 bytes would contradict row_bytes 1 (sim/fault.h ValidateLayout refuses
// that). Mutant: LayoutJson writing heads whenever heads > 0 fails both expectations.
TEST(AddressSpace, TheLayoutOfAFlatViewHasNoHeadsAndValidates) {
  AllocatorSpec spec;
  AddressSpace as(spec);
  TensorShape view = Shape(4096, 1, "bf16");
  view.heads = 16;
  view.cols = 512;
  view.elem_bytes = 2;
  as.AllocateTransient("o", view);
  TensorShape rows = Shape(4, 16384, "bf16");
  rows.heads = 16;
  rows.cols = 512;
  rows.elem_bytes = 2;
  as.AllocateTransient("q", rows);
  const nlohmann::json l = as.LayoutJson();
  ASSERT_EQ(l["allocations"].size(), 2u);
  EXPECT_FALSE(l["allocations"][0].contains("heads")) << l["allocations"][0].dump();
  EXPECT_EQ(l["allocations"][1]["heads"], 16);
  EXPECT_TRUE(ValidateLayout(l).ok()) << ValidateLayout(l).ToString();
}

TEST(LentMemory, AStepReportsTheSameAfterOtherStepsAsOnAFreshThread) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(
           std::filesystem::path(MLASIM_SOURCE_DIR) / "tests" / "cases"))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 60u);
  auto report = [](const std::string& file) {
    auto s = LoadScenarioFile(file);
    if (!s.ok()) return "load: " + s.status().ToString();
    auto r = Replay(*s);
    if (!r.ok()) return "replay: " + r.status().ToString();
    return ReportJson(*r).dump();
  };
  std::vector<std::string> fresh(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    std::thread t([&, i] { fresh[i] = report(files[i]); });
    t.join();
  }
  for (size_t i = 0; i < files.size(); ++i) EXPECT_EQ(report(files[i]), fresh[i]) << files[i];
  for (size_t i = files.size(); i-- > 0;) EXPECT_EQ(report(files[i]), fresh[i]) << files[i];
}

}  // namespace
}  // namespace mlasim::sim
