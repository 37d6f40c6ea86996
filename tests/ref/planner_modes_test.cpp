// The planner's two cell-tracking modes and in-place replanning give the same bytes as a fresh,
// checked plan: over the golden corpus (plans and decode_update chains) and over random request
// sequences (RapidCheck, with a mutant that forgets the previous plan's writes), plus the
// Int32Buffer preparation boundaries and the parallel planner's two store orders.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ref/decode_update.h"
#include "ref/plan_check.h"
#include "ref/planner.h"
#include "ref/sizing.h"
#include "tests/ref/plan_builders.h"
#include "tests/ref/plan_generators.h"
#include "tools/io/input_file.h"
#include "tools/io/golden.h"
#include "tools/io/request_json.h"

namespace mlasim::ref {
namespace {

// A buffer's values and write states as plain vectors (its own use KeepBytesAllocator).
std::vector<int32_t> Values(const Int32Buffer& b) {
  return {b.data.begin(), b.data.end()};
}
std::vector<Cell> States(const Int32Buffer& b) {
  return {b.cells.begin(), b.cells.end()};
}

PlannerOptions Options(CellTracking tracking, PlannerChoice choice = PlannerChoice::kAiterDispatch,
                       PlannerMutant mutant = PlannerMutant::kNone) {
  PlannerOptions o;
  o.choice = choice;
  o.mutant = mutant;
  o.tracking = tracking;
  return o;
}

// "" when `got` holds the same bytes, store counts and input reads as `want` (a fresh checked
// plan), and the same cells too when `got` is tracked; else the first difference.
std::string Difference(const Plan& want, const Plan& got) {
  for (PlanBufferId id : kInt32PlanBuffers) {
    const Int32Buffer& a = *want.buffer(id);
    const Int32Buffer& b = *got.buffer(id);
    const std::string name = GetPlanBufferSpec(id).name;
    if (a.data != b.data) return name + ": values differ";
    if (got.tracking == CellTracking::kChecked && a.cells != b.cells)
      return name + ": cells differ";
    if (got.tracking == CellTracking::kFast && !b.cells.empty())
      return name + ": fast plan has cells";
    if (a.oob_writes != b.oob_writes || a.first_oob_index != b.first_oob_index ||
        a.last_oob_index != b.last_oob_index)
      return name + ": out-of-bounds stores differ";
    if (a.row_width != b.row_width) return name + ": row width differs";
  }
  if (want.input_violations.size() != got.input_violations.size())
    return "input_violations: count differs";
  for (size_t i = 0; i < want.input_violations.size(); ++i) {
    const InputViolation& x = want.input_violations[i];
    const InputViolation& y = got.input_violations[i];
    if (x.array != y.array || x.index != y.index || x.size != y.size || x.work_row != y.work_row ||
        x.work_field != y.work_field)
      return "input_violations[" + std::to_string(i) + "] differs";
  }
  if (want.derived.num_works != got.derived.num_works ||
      want.derived.num_tiles != got.derived.num_tiles ||
      want.derived.payload != got.derived.payload)
    return "derived differs";
  return "";
}

std::string GoldenPath(const char* name) {
  return std::string(MLASIM_GOLDEN_DIR) + "/" + name;
}

// Every golden request planned fresh (checked) and into two plans reused across all records
// (fast and checked); decode_update records also run their update chain on the reused checked
// plan, whose writes the next replan must then restore.
void ExpectCorpusModesAgree(const char* file, int64_t min_records) {
  const std::string path = GoldenPath(file);
  auto in = io::InputFile::Open(path);  // the repository's xz corpus (docs/golden.md)
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  std::istream& f = (*in)->stream();
  std::string line;
  Plan reused_fast, reused_checked;
  int64_t planned = 0, updated = 0;
  while (std::getline(f, line)) {
    const auto rec = nlohmann::json::parse(line);
    auto req = io::ParsePlanRequest(rec.at("input"), "input", true);
    ASSERT_TRUE(req.ok()) << req.status().ToString();
    const int32_t batch = static_cast<int32_t>(req->kv_indptr.size()) - 1;
    auto sizes = GetMlaMetadataInfoV1(*req, batch);
    if (!sizes.ok()) continue;
    auto fresh = PlanMlaMetadataInto(*req, *sizes);
    const Status fast =
        PlanMlaMetadataInto(*req, *sizes, Options(CellTracking::kFast), &reused_fast);
    const Status checked =
        PlanMlaMetadataInto(*req, *sizes, Options(CellTracking::kChecked), &reused_checked);
    ASSERT_EQ(fresh.ok(), fast.ok()) << "record " << rec.at("id");
    ASSERT_EQ(fresh.ok(), checked.ok()) << "record " << rec.at("id");
    if (!fresh.ok()) continue;
    ++planned;
    EXPECT_EQ(Difference(*fresh, reused_fast), "") << "record " << rec.at("id") << " (fast)";
    EXPECT_EQ(Difference(*fresh, reused_checked), "") << "record " << rec.at("id") << " (checked)";
    if (rec.contains("before")) {
      ASSERT_TRUE(io::ApplyUpdateChain(rec, *req, *fresh, nullptr).ok());
      ASSERT_TRUE(io::ApplyUpdateChain(rec, *req, reused_checked, nullptr).ok());
      EXPECT_EQ(Difference(*fresh, reused_checked), "") << "record " << rec.at("id") << " updated";
      ++updated;
    }
  }
  EXPECT_GE(planned, min_records);
  if (std::string(file).find("decode-update") != std::string::npos) {
    EXPECT_EQ(updated, planned);
  }
}

TEST(PlannerModes, GoldenPlansAreByteIdenticalFastCheckedAndReused) {
  ExpectCorpusModesAgree("aiter-v12-dev.jsonl.xz", 1476);
}

TEST(PlannerModes, GoldenDecodeUpdateChainsAreByteIdenticalOnReusedPlans) {
  ExpectCorpusModesAgree("aiter-decode-update-dev.jsonl.xz", 403);
}

// Sizes as a caller might allocate them: info_v1's, or one buffer too short (stores past its
// end are counted, not performed, in every mode alike), or larger (a capacity for a bigger
// batch).
MetadataSizes GenSizes(const MetadataSizes& s) {
  MetadataSizes out = s;
  const auto shrink = [](int32_t x, int32_t by) { return std::max(0, x - by); };
  switch (*rc::gen::inRange(0, 6)) {
    case 0: out.work_indptr = shrink(s.work_indptr, *rc::gen::inRange(1, 4)); break;
    case 1: out.work_info_rows = shrink(s.work_info_rows, *rc::gen::inRange(1, 64)); break;
    case 2: out.reduce_partial_map = shrink(s.reduce_partial_map, *rc::gen::inRange(1, 64)); break;
    case 3: out.reduce_indptr = shrink(s.reduce_indptr, *rc::gen::inRange(1, 8)); break;
    case 4:
      out.work_info_rows += *rc::gen::inRange(0, 100);
      out.reduce_final_map_rows += *rc::gen::inRange(0, 100);
      break;
    default: break;
  }
  return out;
}

// How a reused plan is replanned: the planner, or a variant that forgets what the previous plan
// stored (its dirty extents lost), so stale values survive where the new plan writes nothing.
using Replan = Status (*)(const PlanRequest&, const MetadataSizes&, const PlannerOptions&, Plan*);

Status ForgetfulReplan(const PlanRequest& r, const MetadataSizes& s, const PlannerOptions& o,
                       Plan* plan) {
  for (PlanBufferId id : kInt32PlanBuffers) plan->buffer(id)->dirty_end = 0;
  return PlanMlaMetadataInto(r, s, o, plan);
}

void ReuseProperty(Replan replan) {
  const int32_t steps = *rc::gen::inRange(2, 7);
  Plan reused;
  for (int32_t step = 0; step < steps; ++step) {
    const PlanRequest r = *test::GenRequest();
    const int32_t batch = static_cast<int32_t>(r.kv_indptr.size()) - 1;
    auto info = GetMlaMetadataInfoV1(r, batch);
    if (!info.ok()) continue;
    const MetadataSizes sizes = GenSizes(*info);
    // Every mutant but the nondeterministic one (its pad differs from call to call by design).
    const PlannerMutant mutant =
        *rc::gen::element(PlannerMutant::kNone, PlannerMutant::kNone, PlannerMutant::kNoTailRule,
                          PlannerMutant::kPartialMapOffByOne, PlannerMutant::kDropLastPiece);
    const PlannerChoice choice =
        *rc::gen::element(PlannerChoice::kAiterDispatch, PlannerChoice::kSerial);
    const CellTracking tracking = *rc::gen::element(CellTracking::kFast, CellTracking::kChecked);
    auto fresh = PlanMlaMetadataInto(r, sizes, Options(CellTracking::kChecked, choice, mutant));
    const Status st = replan(r, sizes, Options(tracking, choice, mutant), &reused);
    RC_ASSERT(fresh.ok() == st.ok());
    if (!fresh.ok()) continue;
    const std::string diff = Difference(*fresh, reused);
    if (!diff.empty()) RC_FAIL("step " + std::to_string(step) + ": " + diff);
  }
}

TEST(PlannerModes, RandomSequencesReplannedInPlaceMatchFreshPlans) {
  EXPECT_TRUE(rc::check("replan in place == fresh", [] { ReuseProperty(PlanMlaMetadataInto); }));
}

TEST(PlannerModes, ReusePropertyCatchesAReplanThatForgetsThePreviousWrites) {
  EXPECT_FALSE(rc::check("forgetful replan", [] { ReuseProperty(ForgetfulReplan); }));
}

// The parallel planner stores work_indptr in the kernel's order (the total first, then the
// fills) only when work_indptr is too short to hold num_clusters + 1 entries; otherwise fills
// first and the total after. Same bytes: a one-entry-short buffer must agree on every other
// element and buffer, over deterministic pseudo-random batches (zero-KV requests included).
TEST(PlannerModes, ParallelPlannerStoreOrdersAgree) {
  uint32_t x = 20261201;
  const auto next = [&x](uint32_t mod) {
    x = x * 1664525u + 1013904223u;
    return static_cast<int32_t>((x >> 8) % mod);
  };
  int32_t compared = 0;
  for (int32_t trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> kv(static_cast<size_t>(1 + next(300)));
    for (int32_t& k : kv) k = next(5) == 0 ? 0 : next(20000);
    const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, kv, 1 + next(304));
    auto full = PlanMlaMetadata(r, Options(CellTracking::kChecked, PlannerChoice::kParallel));
    ASSERT_TRUE(full.ok());
    MetadataSizes short_sizes = full->sizes;
    short_sizes.work_indptr = full->derived.num_clusters;  // one short: kernel order
    auto cut = PlanMlaMetadataInto(r, short_sizes,
                                   Options(CellTracking::kChecked, PlannerChoice::kParallel));
    ASSERT_TRUE(cut.ok());
    for (PlanBufferId id : kInt32PlanBuffers) {
      const Int32Buffer& a = *full->buffer(id);
      const Int32Buffer& b = *cut->buffer(id);
      if (id == PlanBufferId::kWorkIndptr) {
        ASSERT_EQ(std::vector<int32_t>(a.data.begin(), a.data.end() - 1), Values(b)) << trial;
        EXPECT_GE(b.oob_writes, 1) << trial;  // at least the total at index num_clusters
        EXPECT_EQ(b.first_oob_index, full->derived.num_clusters) << trial;
      } else {
        ASSERT_EQ(a.data, b.data) << GetPlanBufferSpec(id).name << ", trial " << trial;
        ASSERT_EQ(a.cells, b.cells) << GetPlanBufferSpec(id).name << ", trial " << trial;
      }
    }
    ++compared;
  }
  EXPECT_EQ(compared, 300);
}

// A zero-KV batch that starts where the current cluster has no room left takes no fragment but
// closes that cluster: it stores work_indptr[cu + 1]. The parallel walk's per-batch range proof
// counted the batch's fragments only (cu + 0 < size), so with work_indptr sized for fewer
// clusters than the planner ran (a scenario's `sizing` disagreement; found by `mlasim fuzz --small
// --seed 0x9E3779B97F4A7C15 --generate ragged-q,disagreements,paged`, "corrupted size vs.
// prev_size") that store went one int32 past the buffer instead of being counted. The request:
// 16 batches on gfx950, 512 CUs; work_indptr of 18 entries (17 clusters); batch 10 (0 tokens)
// starts at cluster 17 with no room left.
TEST(PlannerModes, ParallelWalkCountsAWastedClusterCloseOfAnEmptyBatchPastWorkIndptr) {
  const std::vector<int32_t> kv = {27, 28, 27, 28, 0, 1, 27, 28, 32, 33, 0, 1, 2, 3, 64, 64};
  PlanRequest r = test::DenseRequest(Arch::kGfx950, 16, 1, kv, 512);
  r.q_dtype = r.kv_dtype = DType::kFp8;
  for (CellTracking tracking : {CellTracking::kChecked, CellTracking::kFast}) {
    auto full = PlanMlaMetadata(r, Options(tracking, PlannerChoice::kParallel));
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    ASSERT_EQ(full->derived.num_clusters, 512);
    MetadataSizes sizes = full->sizes;
    sizes.work_indptr = 18;
    auto cut = PlanMlaMetadataInto(r, sizes, Options(tracking, PlannerChoice::kParallel));
    ASSERT_TRUE(cut.ok()) << cut.status().ToString();
    const Int32Buffer& w = cut->work_indptr;
    ASSERT_EQ(w.data.size(), 18u);
    EXPECT_EQ(
        std::vector<int32_t>(full->work_indptr.data.begin(), full->work_indptr.data.begin() + 18),
        Values(w));
    // Past the end, counted and not performed: the total stored at [18, 512] (495), batch 10's
    // close of cluster 17 at [18] (the store that went past the buffer: 506 counted before) and
    // the later batches' closes of clusters 18 and up (11).
    EXPECT_EQ(w.oob_writes, 507);
    EXPECT_EQ(w.first_oob_index, 18);
    EXPECT_EQ(w.last_oob_index, 512);
  }
}

// The walks skip their per-store range checks when they can prove every store in range (the
// info_v1 sizes); buffers cut to exactly what a plan writes fail that proof and take the checked
// stores. Both must write the same values: every golden request planned both ways.
TEST(PlannerModes, CheckedAndUncheckedStoresWriteTheSameValues) {
  const std::string path = GoldenPath("aiter-v12-dev.jsonl.xz");
  auto in = io::InputFile::Open(path);  // the repository's xz corpus (docs/golden.md)
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  std::istream& f = (*in)->stream();
  std::string line;
  int64_t compared = 0;
  while (std::getline(f, line)) {
    const auto rec = nlohmann::json::parse(line);
    auto req = io::ParsePlanRequest(rec.at("input"), "input", true);
    ASSERT_TRUE(req.ok());
    auto full = PlanMlaMetadata(*req);
    if (!full.ok()) continue;
    // Exactly the written extent of every buffer (at least one element).
    MetadataSizes cut = full->sizes;
    const auto extent = [](const Int32Buffer& b) {
      int64_t n = 0;
      for (int64_t i = 0; i < b.size(); ++i)
        if (b.written(i)) n = i + 1;
      return static_cast<int32_t>(std::max<int64_t>(n, 1));
    };
    cut.work_indptr = extent(full->work_indptr);
    cut.work_info_rows = (extent(full->work_info) + kWorkInfoWidth - 1) / kWorkInfoWidth;
    cut.reduce_final_map_rows =
        (extent(full->reduce_final_map) + kReduceFinalMapWidth - 1) / kReduceFinalMapWidth;
    cut.reduce_partial_map = extent(full->reduce_partial_map);
    auto exact = PlanMlaMetadataInto(*req, cut);
    ASSERT_TRUE(exact.ok());
    for (PlanBufferId id : kInt32PlanBuffers) {
      const Int32Buffer& a = *full->buffer(id);
      const Int32Buffer& b = *exact->buffer(id);
      ASSERT_EQ(b.oob_writes, 0) << GetPlanBufferSpec(id).name << ", record " << rec.at("id");
      ASSERT_TRUE(std::equal(b.data.begin(), b.data.end(), a.data.begin()))
          << GetPlanBufferSpec(id).name << ", record " << rec.at("id");
      ASSERT_TRUE(std::equal(b.cells.begin(), b.cells.end(), a.cells.begin()))
          << GetPlanBufferSpec(id).name << ", record " << rec.at("id");
    }
    ++compared;
  }
  EXPECT_GE(compared, 1476);
}

// Int32Buffer preparation at its boundaries: empty, one element, growing, shrinking, and the
// tracking mode changing between plans.
TEST(PlannerModes, BufferPrepareRestoresOnlyWhatWasWritten) {
  Int32Buffer b;
  b.Prepare(0, 1, CellTracking::kChecked);
  EXPECT_EQ(b.size(), 0);
  EXPECT_TRUE(b.tracked());
  b.Store(0, 7);  // out of range
  EXPECT_EQ(b.oob_writes, 1);
  EXPECT_EQ(b.dirty_end, 0);
  b.Prepare(1, 1, CellTracking::kChecked);
  EXPECT_EQ(b.oob_writes, 0);
  EXPECT_EQ(Values(b), std::vector<int32_t>{kPoisonValue});
  b.Store(0, 7);
  EXPECT_EQ(b.dirty_end, 1);
  b.Prepare(4, 1, CellTracking::kFast);  // grow, untracked
  EXPECT_EQ(Values(b), std::vector<int32_t>(4, kPoisonValue));
  EXPECT_TRUE(b.cells.empty());
  EXPECT_FALSE(b.tracked());
  b.Store(2, 5);
  EXPECT_EQ(b.dirty_end, 3);
  b.Prepare(2, 1, CellTracking::kChecked);  // shrink, tracked again
  EXPECT_EQ(Values(b), std::vector<int32_t>(2, kPoisonValue));
  EXPECT_EQ(States(b), std::vector<Cell>(2, Cell::kUnwritten));
  b.Prepare(4, 1, CellTracking::kChecked);  // grow back: the old element 2 is gone
  EXPECT_EQ(Values(b), std::vector<int32_t>(4, kPoisonValue));
}

TEST(PlannerModes, RewriteRestoresTheTailPastTheNewPrefix) {
  Int32Buffer b;
  b.Reset(6, 1);
  for (int i = 0; i < 5; ++i) b.Store(i, 10 + i);
  b.PrepareForRewrite(6, 1, CellTracking::kChecked);
  EXPECT_EQ(b.stale_end, 5);
  b.Put<CellTracking::kChecked>(0, 1);
  b.Put<CellTracking::kChecked>(1, 2);
  b.dirty_end = 2;  // the writer declares its prefix
  b.FinishRewrite();
  EXPECT_EQ(Values(b),
            (std::vector<int32_t>{1, 2, kPoisonValue, kPoisonValue, kPoisonValue, kPoisonValue}));
  EXPECT_EQ(States(b), (std::vector<Cell>{Cell::kWritten, Cell::kWritten, Cell::kUnwritten,
                                          Cell::kUnwritten, Cell::kUnwritten, Cell::kUnwritten}));
  EXPECT_EQ(b.stale_end, 0);
}

// The reserve invariant (Int32Buffer): a buffer that shrinks poisons the written elements it cuts
// off, so that growing back within its memory (no write at all) shows the fresh buffer's
// contents; a buffer that outgrows its memory is poisoned at its new elements; Reset poisons
// the whole memory; an untracked buffer keeps no memory for write states.
TEST(PlannerModes, BuffersGrowWithinTheirMemoryAsFreshBuffers) {
  const std::vector<int32_t> poison8(8, kPoisonValue);
  const std::vector<Cell> unwritten8(8, Cell::kUnwritten);
  Int32Buffer b;
  b.Reset(8, 1);
  for (int i = 0; i < 8; ++i) b.Store(i, 10 + i);
  b.Prepare(3, 1, CellTracking::kChecked);  // shrink: all 8 written elements restored
  EXPECT_EQ(Values(b), std::vector<int32_t>(3, kPoisonValue));
  b.Prepare(8, 1, CellTracking::kChecked);  // grow back within the memory
  EXPECT_EQ(b.data.capacity(), 8u);
  EXPECT_EQ(Values(b), poison8);
  EXPECT_EQ(States(b), unwritten8);

  // The rewrite protocol: the shrink cuts off written elements 3..7.
  for (int i = 0; i < 8; ++i) b.Store(i, 20 + i);
  b.PrepareForRewrite(3, 1, CellTracking::kChecked);
  EXPECT_EQ(b.stale_end, 3);
  b.Put<CellTracking::kChecked>(0, 1);
  b.Put<CellTracking::kChecked>(1, 2);
  b.FinishRewrite();
  EXPECT_EQ(Values(b), (std::vector<int32_t>{1, 2, kPoisonValue}));
  b.PrepareForRewrite(8, 1, CellTracking::kChecked);  // grow back; nothing rewritten
  b.FinishRewrite();
  EXPECT_EQ(b.data.capacity(), 8u);
  EXPECT_EQ(Values(b), poison8);
  EXPECT_EQ(States(b), unwritten8);

  // Past the memory: the new elements poisoned; 0 and 1 elements at the boundaries.
  b.PrepareForRewrite(1, 1, CellTracking::kChecked);
  b.FinishRewrite();
  b.PrepareForRewrite(9, 1, CellTracking::kChecked);
  b.FinishRewrite();
  EXPECT_EQ(Values(b), std::vector<int32_t>(9, kPoisonValue));
  EXPECT_EQ(States(b), std::vector<Cell>(9, Cell::kUnwritten));
  b.Prepare(0, 1, CellTracking::kChecked);
  EXPECT_EQ(b.size(), 0);
  b.Prepare(9, 1, CellTracking::kChecked);
  EXPECT_EQ(Values(b), std::vector<int32_t>(9, kPoisonValue));

  // Reset of a buffer with more memory than it keeps.
  for (int i = 0; i < 9; ++i) b.Store(i, 30 + i);
  b.Reset(2, 1);
  b.PrepareForRewrite(9, 1, CellTracking::kChecked);
  b.FinishRewrite();
  EXPECT_EQ(Values(b), std::vector<int32_t>(9, kPoisonValue));
  EXPECT_EQ(States(b), std::vector<Cell>(9, Cell::kUnwritten));

  // Untracked: no write-state memory, and tracked again: every state kUnwritten.
  b.Store(4, 5);
  b.PrepareForRewrite(9, 1, CellTracking::kFast);
  EXPECT_EQ(b.cells.capacity(), 0u);
  b.Put<CellTracking::kFast>(0, 3);
  b.FinishRewrite();
  b.PrepareForRewrite(9, 1, CellTracking::kChecked);
  b.FinishRewrite();
  EXPECT_EQ(Values(b), std::vector<int32_t>(9, kPoisonValue));
  EXPECT_EQ(States(b), std::vector<Cell>(9, Cell::kUnwritten));
}

TEST(PlannerModes, FastPlansAreRefusedByTheWriteStateReaders) {
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, {300, 40, 700}, 8);
  auto fast = PlanMlaMetadata(r, Options(CellTracking::kFast));
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->tracking, CellTracking::kFast);
  DecodeUpdateRequest u;
  u.kv_indptr = {0, 301, 342, 1043};
  u.qo_indptr = r.qo_indptr;
  const Status st = DecodeUpdateMlaMetadataV1(u, *fast);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.field(), "plan");
  EXPECT_DEATH(CheckPlan(r, *fast), "CellTracking::kChecked");
}

}  // namespace
}  // namespace mlasim::ref
