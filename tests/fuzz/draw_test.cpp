// fuzz/draw.h: a direct draw equals RapidCheck's draw of the same distribution from the same
// random source and size, value for value, alone and in a sequence (the stream a case's draws
// share), for every distribution the generator uses, at the sizes and range edges where
// RapidCheck's scaling and selection differ; and whole generated cases drawn directly
// (campaigns: ScenarioAndSwarmFromSeed, SwarmFromSeed) equal RapidCheck's
// (ScenarioFromSeed(...).value(), which shrinking replays) for every generator family.
#include "fuzz/draw.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz/scenario_gen.h"
#include "sim/scenario_json.h"

namespace mlasim::fuzz {
namespace {

// Sizes where inRange's scaling differs: none of the range (0), one step (1), mid, the nominal
// size (100: the whole range) and past it.
constexpr int kSizes[] = {0, 1, 7, 50, 99, 100, 150};

// `draws` run through RapidCheck (rc::gen::exec) and directly, from the same seed and size.
template <typename Draws>
void ExpectSameDraws(const Draws& draws, uint64_t seeds = 300) {
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    for (int size : kSizes) {
      const auto through = rc::gen::exec([&] {
                             Drawer d;
                             return draws(d);
                           })(rc::Random(seed), size)
                               .value();
      Drawer direct(rc::Random(seed), size);
      ASSERT_EQ(draws(direct), through) << "seed " << seed << ", size " << size;
    }
  }
}

// Two draws of `dist` and an inRange after them: the stream advances the same way.
template <typename D>
void ExpectSameDist(const D& dist, uint64_t seeds = 300) {
  ExpectSameDraws(
      [&](Drawer& d) {
        auto a = d(dist);
        auto b = d(dist);
        return std::make_tuple(a, b, d(InRange<int32_t>{0, 1 << 30}));
      },
      seeds);
}

TEST(Draw, JustTakesItsDrawFromTheStream) {
  ExpectSameDist(Just<int32_t>{42});
}

TEST(Draw, InRangeScalesWithTheSizeAsRapidCheckDoes) {
  ExpectSameDist(InRange<int32_t>{1, 16});
  ExpectSameDist(InRange<int32_t>{-8, 9});     // negative lower bound
  ExpectSameDist(InRange<int32_t>{5, 6});      // one value
  ExpectSameDist(InRange<int32_t>{0, 65536});  // wider than the size
  ExpectSameDist(
      InRange<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()});
  ExpectSameDist(InRange<int>{0, 6});
}

TEST(Draw, ResizedDrawsAtItsOwnSize) {
  ExpectSameDist(Resized<InRange<int32_t>>{rc::kNominalSize, {0, 9}});
  ExpectSameDist(Resized<InRange<int32_t>>{0, {0, 9}});
}

TEST(Draw, MappedAppliesItsFunctionToTheDraw) {
  ExpectSameDist(Map(InRange<int32_t>{1, 128}, [](int32_t k) { return std::max(5, 16 * k); }));
}

TEST(Draw, ElementsPickUniformlyWhateverTheSize) {
  ExpectSameDist(Element(7));  // one element
  ExpectSameDist(Element(1, 16, 64, 305, 320, 1024));
  ExpectSameDist(Element<std::string>("asm", "asm", "opus", "hk"));
  const std::vector<std::string> profiles = {"a", "b", "c"};
  ExpectSameDist(ElementOf<std::string>{&profiles});
  const std::vector<size_t> one = {3};
  ExpectSameDist(ElementOf<size_t>{&one});
  ExpectSameDist(IndexBelow{1});
  ExpectSameDist(IndexBelow{128});
}

TEST(Draw, WeightedPicksByCumulativeWeight) {
  ExpectSameDist(WeightedElement(1, true, 3, false));
  ExpectSameDist(WeightedElement<int32_t>(6, 16, 2, 32, 2, 64, 1, 128, 1, 48, 1, 8, 1, 24));
  ExpectSameDist(WeightedElement<int32_t>(1, 10));                // one value
  ExpectSameDist(WeightedElement<int32_t>(0, 10, 1, 20, 0, 30));  // zero weights never picked
}

TEST(Draw, OneOfPicksThenDrawsFromTheSplitStream) {
  ExpectSameDist(WeightedOneOf<int32_t>({3, 1}, Just<int32_t>{0}, InRange<int32_t>{0, 4}));
  ExpectSameDist(WeightedOneOf<int32_t>(
      {3, 2, 2, 1}, Just<int32_t>{2}, Map(InRange<int32_t>{1, 16}, [](int32_t x) { return 2 + x; }),
      InRange<int32_t>{2, 8192}, InRange<int32_t>{2, 65536}));
  ExpectSameDist(WeightedOneOf<int32_t>({1}, InRange<int32_t>{0, 100}));  // one alternative
}

TEST(Draw, VectorOfDrawsItsCountThenEachElement) {
  ExpectSameDist(VectorOf<InRange<int32_t>>{{1, 80}}, 100);
  ExpectSameDist(WeightedOneOf<std::vector<int32_t>>({3, 1}, VectorOf<InRange<int32_t>>{{1, 80}},
                                                     Just<std::vector<int32_t>>{{1, 2, 4}}),
                 100);
}

TEST(Draw, AlternativeDrawsOneDistOfTheOptions) {
  const auto options =
      WeightedOneOf<int32_t>({1, 2, 4}, Just<int32_t>{0}, Just<int32_t>{1}, InRange<int32_t>{2, 8});
  for (size_t i = 0; i < 3; ++i)
    ExpectSameDraws([&](Drawer& d) {
      return std::make_pair(DrawAlternative(d, options, i), d(InRange<int32_t>{0, 1000}));
    });
  Drawer direct(rc::Random(1), 50);
  EXPECT_EQ(DrawAlternative(direct, options, 0), 0);
  EXPECT_EQ(DrawAlternative(direct, options, 1), 1);
}

TEST(Draw, EmptyRangesAndContainersThrowAsRapidCheckDoes) {
  Drawer direct(rc::Random(3), 50);
  EXPECT_THROW(direct(InRange<int32_t>{5, 5}), rc::GenerationFailure);
  EXPECT_THROW(direct(InRange<int32_t>{5, 4}), rc::GenerationFailure);
  const std::vector<int> none;
  EXPECT_THROW(direct(ElementOf<int>{&none}), rc::GenerationFailure);
  EXPECT_THROW(direct(IndexBelow{0}), rc::GenerationFailure);
  EXPECT_EQ(direct(InRange<int32_t>{5, 6}), 5);  // the smallest range that draws
}

// Whole cases: the direct generator (campaigns) against RapidCheck's (shrinking), for every
// family and switch the generator reads.
void ExpectSameCases(const GenConfig& config, uint64_t seeds) {
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const int size = static_cast<int>(10 + (seed * 7) % 91);
    const sim::Scenario through = ScenarioFromSeed(config, seed, size).value();
    SwarmDraw swarm;
    const sim::Scenario direct = ScenarioAndSwarmFromSeed(config, seed, size, &swarm);
    ASSERT_EQ(sim::ScenarioToJson(direct).dump(), sim::ScenarioToJson(through).dump())
        << "seed " << seed << ", size " << size;
    ASSERT_EQ(swarm.omitted, SwarmFromSeed(config, seed, size).omitted) << "seed " << seed;
  }
}

TEST(DrawnCases, DirectCasesAreRapidChecksForEveryFamily) {
  GenConfig plain;
  ExpectSameCases(plain, 150);
  GenConfig every;
  every.small = true;
  every.max_batch = 64;
  ASSERT_TRUE(
      EnableFamilies({"hostile-indices", "disagreements", "paged", "ragged-q"}, &every).ok());
  ExpectSameCases(every, 150);
  every.swarm = true;  // every knob drawn, options left out
  ExpectSameCases(every, 300);
  GenConfig kernel;
  kernel.kernel_inputs = true;
  kernel.sparse_only = true;
  kernel.swarm = true;
  kernel.profiles = {"atom-2026-08"};
  ExpectSameCases(kernel, 150);
}

// Every switch of GenConfig the generator reads, in combinations: batch limits at their edges
// (1, 2, 64, 65, 512), one to three profiles (the vLLM / SGLang dialects among them), sparse
// only, no DCP / DP, and kernel limits (one call kind, one KV dtype, page sizes, heads), with and
// without swarm.
TEST(DrawnCases, DirectCasesAreRapidChecksUnderEveryConfigSwitch) {
  const std::vector<std::vector<std::string>> profiles = {
      {"atom-2026-08"},
      {"atom-2026-11", "vllm-flashmla"},
      {"atom-2026-08", "sglang-flashinfer", "atom-2026-11"}};
  KernelLimits flashmla;  // dense only, bf16, pages of 64, heads a multiple of 16
  flashmla.sparse = flashmla.fp8_kv = false;
  flashmla.page_size_multiple = flashmla.max_page_size = 64;
  flashmla.heads_multiple = 16;
  KernelLimits sparse_fp8;
  sparse_fp8.dense = sparse_fp8.bf16_kv = false;
  sparse_fp8.max_heads = 32;
  const KernelLimits limits[] = {KernelLimits{}, flashmla, sparse_fp8};
  int configs = 0;
  for (int32_t max_batch : {1, 2, 64, 65, 512})
    for (size_t p = 0; p < profiles.size(); ++p)
      for (int variant = 0; variant < 4; ++variant) {
        GenConfig c;
        c.max_batch = max_batch;
        c.small = max_batch <= 64;
        c.profiles = profiles[p];
        c.sparse_only = variant == 1;
        c.allow_dcp = c.allow_dp = variant != 2;
        c.swarm = variant >= 2;
        c.kernel = limits[(max_batch + static_cast<int32_t>(p) + variant) % 3];
        c.kernel_inputs = variant == 3;
        ASSERT_TRUE(EnableFamilies(variant % 2 == 0
                                       ? std::vector<std::string>{"disagreements", "ragged-q"}
                                       : std::vector<std::string>{"hostile-indices", "paged"},
                                   &c)
                        .ok());
        SCOPED_TRACE(::testing::Message()
                     << "max_batch " << max_batch << ", profiles " << p << ", variant " << variant);
        ExpectSameCases(c, 12);
        ++configs;
      }
  EXPECT_EQ(configs, 60);
}

// Under a profile whose call table has no sparse decode (vLLM's, SGLang's) every case is dense
// (the step refuses a sparse model there); ATOM's profiles still draw sparse cases, with the
// shapes they had (the rule draws nothing).
TEST(DrawnCases, SparseCasesOnlyUnderProfilesWithASparseDecode) {
  GenConfig mixed;
  mixed.small = true;
  mixed.profiles = {"atom-2026-08", "vllm-flashmla-2025-07", "sglang-flashmla"};
  GenConfig atom = mixed;
  atom.profiles = {"atom-2026-08"};
  int sparse = 0, dense_only_profile = 0;
  SwarmDraw swarm;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const sim::Scenario s = ScenarioAndSwarmFromSeed(mixed, seed, 50, &swarm);
    if (s.engine.table != "atom") {
      ++dense_only_profile;
      EXPECT_FALSE(s.model.sparse) << "seed " << seed << " " << s.engine.name;
    }
    sparse += s.model.sparse;
    const sim::Scenario a = ScenarioAndSwarmFromSeed(atom, seed, 50, &swarm);
    if (s.engine.table == "atom")  // the same draws: the same model
      EXPECT_EQ(a.model.sparse, s.model.sparse) << "seed " << seed;
  }
  EXPECT_GT(dense_only_profile, 100);
  EXPECT_GT(sparse, 30);
}

TEST(DrawnCases, SwarmMasksDrawnDirectlyLeaveOptionsOut) {
  GenConfig c;
  c.swarm = true;
  ASSERT_TRUE(EnableFamilies({"disagreements"}, &c).ok());
  int left_out = 0;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const SwarmDraw d = SwarmFromSeed(c, seed, 50);
    ASSERT_EQ(d.omitted.size(), SwarmKnobs(c).size());
    for (uint32_t m : d.omitted) left_out += m != 0;
  }
  EXPECT_GT(left_out, 50);  // about 14 knobs x 50 cases x (1 - 2^-n - 2^-n)
  GenConfig off;            // no swarm: nothing drawn
  EXPECT_TRUE(SwarmFromSeed(off, 1, 50).omitted.empty());
}

TEST(DrawnCases, PinnedCasesAreRapidChecksAndDrawNoSwarm) {
  GenConfig c;
  auto pins = std::make_shared<ReportPins>();
  pins->base.name = "pinned";
  pins->base.mtp_k = 2;
  pins->base.model.sparse = true;
  pins->base.model.topk = 64;
  pins->base.allocator.model = sim::AllocatorModel::kCaching;
  pins->batch = 5;
  c.pins = pins;
  c.swarm = true;  // ignored with pins
  ExpectSameCases(c, 100);
  SwarmDraw swarm;
  ScenarioAndSwarmFromSeed(c, 3, 40, &swarm);
  EXPECT_TRUE(swarm.omitted.empty());
}

}  // namespace
}  // namespace mlasim::fuzz
