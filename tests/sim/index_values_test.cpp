// sim/index_values.h: an explicit index value no index fill of the step places is refused naming
// its JSON path (a user's scenario) or dropped (a generated one); every placed value is kept,
// whatever it holds (-1, past the cache, INT_MAX: the hostile indices the model carries).
#include "sim/index_values.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz/scenario_gen.h"
#include "sim/engine.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/cli.h"

namespace mlasim::sim {
namespace {

namespace fs = std::filesystem;

// G-hostile-sparse-indices-masked: sparse, contexts 100 and 200, K = 1 (4 verify tokens).
Scenario Hostile() {
  auto s = LoadScenarioFile(
      (fs::path(MLASIM_SOURCE_DIR) / "tests/cases/G-hostile-sparse-indices-masked.json").string());
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

Status Check(const Scenario& s) {
  auto t = ExpandStep(s);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return CheckIndexValuesPlaced(s, *t);
}

// The verify fill's region of `token` (slots), from the expanded step.
int64_t VerifyRegion(const Scenario& s, int32_t token) {
  auto t = ExpandStep(s);
  for (const Call& c : t->calls)
    if (c.kind == CallKind::kIndexFill && c.step == "verify" && c.fill_content)
      return int64_t{c.fill_indptr[token + 1]} - c.fill_indptr[token];
  return -1;
}

TEST(IndexValues, EveryHostileValueAFillPlacesIsKept) {
  Scenario s = Hostile();
  s.kv_cache.index_values = {
      {0, 0, -1}, {1, 1, 2147483647}, {2, 2, -2147483648LL}, {3, 0, 1 << 24}};
  EXPECT_TRUE(Check(s).ok());
  Scenario d = s;
  DropUnplacedIndexValues(d);
  EXPECT_EQ(d.kv_cache.index_values.size(), 4u);
  EXPECT_TRUE(Check(Scenario()).ok());  // no values: nothing to place
}

TEST(IndexValues, TokenBoundary) {
  Scenario s = Hostile();
  s.kv_cache.index_values = {{3, 0, -1}};  // the last verify token: placed
  EXPECT_TRUE(Check(s).ok());
  s.kv_cache.index_values = {{3, 0, -1}, {4, 0, -1}};  // one past it
  const Status st = Check(s);
  EXPECT_EQ(st.field(), "$.kv_cache.index_values[1]");
  EXPECT_EQ(st.message(),
            "token 4 is past the 4 token region(s) of the step's widest index fill "
            "(verify.indexer_gather), so no fill places value -1; tokens are 0..3");
}

TEST(IndexValues, PositionBoundary) {
  Scenario s = Hostile();
  const int64_t len = VerifyRegion(s, 1);
  ASSERT_GT(len, 1);
  s.kv_cache.index_values = {{1, static_cast<int32_t>(len - 1), 7}};  // the region's last slot
  EXPECT_TRUE(Check(s).ok());
  s.kv_cache.index_values = {{1, static_cast<int32_t>(len), 7}};  // one past it
  const Status st = Check(s);
  EXPECT_EQ(st.field(), "$.kv_cache.index_values[0]");
  EXPECT_EQ(st.message(), "position " + std::to_string(len) + " is past token 1's region of " +
                              std::to_string(len) +
                              " slot(s) (its longest over the step's index fills, "
                              "verify.indexer_gather the widest), so no fill places value 7; "
                              "positions are 0.." +
                              std::to_string(len - 1));
}

TEST(IndexValues, AStepWithoutContentFillsPlacesNothing) {
  Scenario s = Hostile();
  s.kv_cache.index_values = {{0, 0, -1}};
  const Status st = CheckIndexValuesPlaced(s, Trace());
  EXPECT_EQ(st.field(), "$.kv_cache.index_values[0]");
  EXPECT_EQ(st.message(),
            "the step has no index fill that writes values (the KV cache is modelled but no call "
            "fills an index buffer)");
}

TEST(IndexValues, DropKeepsThePlacedOnesInOrder) {
  Scenario s = Hostile();
  const int32_t len = static_cast<int32_t>(VerifyRegion(s, 0));
  s.kv_cache.index_values = {{0, 0, -1}, {9, 0, 5}, {0, len, 6}, {2, 1, 2147483647}};
  DropUnplacedIndexValues(s);
  ASSERT_EQ(s.kv_cache.index_values.size(), 2u);
  EXPECT_EQ(s.kv_cache.index_values[0].value, -1);
  EXPECT_EQ(s.kv_cache.index_values[1].value, 2147483647);
  EXPECT_TRUE(Check(s).ok());
}

// The generator draws positions without the regions' lengths and keeps the values a fill places:
// every generated case replays (the hostile-indices family, 40 seeds, some values kept).
TEST(IndexValues, GeneratedCasesHoldOnlyPlacedValues) {
  fuzz::GenConfig every;
  every.profiles = {"atom-2026-08", "atom-2026-11"};
  every.small = true;
  every.max_batch = 64;
  ASSERT_TRUE(fuzz::EnableFamilies({"hostile-indices", "disagreements", "paged"}, &every).ok());
  size_t kept = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const Scenario s =
        fuzz::ScenarioFromSeed(every, seed, static_cast<int>(10 + (seed * 7) % 91)).value();
    kept += s.kv_cache.index_values.size();
    auto t = ExpandStep(s);
    if (t.ok()) {
      EXPECT_TRUE(CheckIndexValuesPlaced(s, *t).ok()) << "seed " << seed;
    }
    // No slot twice: the case's JSON parses (ParseScenario refuses a repeated slot).
    const auto parsed = ParseScenario(ScenarioToJson(s));
    EXPECT_TRUE(parsed.ok()) << "seed " << seed << ": " << parsed.status().ToString();
  }
  EXPECT_GT(kept, 0u);
}

// A slot (token, position) stated twice: the scenario's JSON is refused naming the second entry
// and the first (replay read both values, numerics the larger: the slot's value was a guess); a
// generated scenario keeps the first value of each slot.
TEST(IndexValues, ASlotTakesOneValue) {
  Scenario s = Hostile();
  s.kv_cache.index_values = {{0, 0, 5}, {0, 1, 7}, {1, 0, 5}, {0, 0, -1}, {0, 1, 7}};
  nlohmann::json doc = ScenarioToJson(s);
  const auto parsed = ParseScenario(doc);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().ToString(),
            "$.kv_cache.index_values[3]: token 0 position 0 is already set by "
            "$.kv_cache.index_values[0]; a slot takes one value");
  Scenario d = s;
  DropRepeatedIndexSlots(d);
  ASSERT_EQ(d.kv_cache.index_values.size(), 3u);
  EXPECT_EQ(d.kv_cache.index_values[0].value, 5);  // the first of slot (0, 0), not -1
  EXPECT_EQ(d.kv_cache.index_values[1].value, 7);
  EXPECT_EQ(d.kv_cache.index_values[2].token, 1);
  Scenario u = s;
  DropUnplacedIndexValues(u);  // drops the repeats too
  ASSERT_EQ(u.kv_cache.index_values.size(), 3u);
  EXPECT_EQ(u.kv_cache.index_values[0].value, 5);
  doc["kv_cache"]["index_values"].erase(3);
  doc["kv_cache"]["index_values"].erase(3);
  EXPECT_TRUE(ParseScenario(doc).ok());  // distinct slots, the same value in two of them: fine
}

// replay and numerics of a scenario file: exit 2 naming the JSON path.
TEST(IndexValues, ReplayAndNumericsRefuseAnUnplacedValue) {
  Scenario s = Hostile();
  s.kv_cache.index_values = {{1, 3, -1}, {4, 0, 2147483647}};
  const fs::path file =
      fs::temp_directory_path() / ("mlasim_index_values_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << ScenarioToJson(s).dump();
  for (const char* command : {"replay", "numerics"}) {
    std::ostringstream out, err;
    EXPECT_EQ(cli::RunMlasim({command, file.string()}, out, err), 2) << command;
    EXPECT_EQ(out.str(), "");
    EXPECT_NE(err.str().find("$.kv_cache.index_values[1]: token 4 is past the 4 token region(s)"),
              std::string::npos)
        << err.str();
  }
  fs::remove(file);
}

}  // namespace
}  // namespace mlasim::sim

namespace mlasim::sim {
namespace {

// SegmentHolding finds the same segment by binary search (a long sorted, disjoint list: a
// captured page table's runs) as the walk in order finds (a fill's few segments), at every
// element of random lists of 1 to 200 segments with gaps, at both ends and one past them; an
// overlapping list (a hostile indptr's fill) is walked, the first holding segment deciding.
TEST(IndexContent, SegmentHoldingSearchesAsTheWalkFinds) {
  uint64_t state = 12345;
  auto next = [&state](int64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(n));
  };
  for (int trial = 0; trial < 200; ++trial) {
    IndexContent ct;
    int64_t at = next(3);
    const int64_t count = 1 + next(200);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t len = 1 + next(4);
      ct.segments.push_back({at, at + len, next(1000)});
      at += len + next(3);  // gaps of 0..2 elements
    }
    ct.sorted_disjoint = SortedDisjoint(ct.segments);
    ASSERT_TRUE(ct.sorted_disjoint);
    IndexContent walked = ct;
    walked.sorted_disjoint = false;  // forces the walk
    for (int64_t e = -1; e <= at + 1; ++e)
      ASSERT_EQ(SegmentHolding(ct, e),
                SegmentHolding(walked, e) == nullptr
                    ? nullptr
                    : &ct.segments[SegmentHolding(walked, e) - walked.segments.data()])
          << "trial " << trial << " element " << e;
  }
  IndexContent overlap;
  overlap.segments = {{0, 10, 100}, {5, 12, 200}};
  EXPECT_FALSE(SortedDisjoint(overlap.segments));
  EXPECT_EQ(SegmentHolding(overlap, 7)->base, 100);  // the first in order
  EXPECT_EQ(SegmentHolding(overlap, 11)->base, 200);
  EXPECT_EQ(SegmentHolding(overlap, 12), nullptr);
  EXPECT_TRUE(SortedDisjoint({}));
  EXPECT_FALSE(SortedDisjoint({{4, 6, 0}, {0, 2, 0}}));  // disjoint but not sorted
  EXPECT_TRUE(SortedDisjoint({{0, 2, 0}, {2, 4, 0}}));   // touching is disjoint
}

}  // namespace
}  // namespace mlasim::sim
