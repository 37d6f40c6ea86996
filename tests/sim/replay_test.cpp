// The founding case end to end, fault attribution and fault-log parsing.
#include "sim/replay.h"

#include <gtest/gtest.h>

#include "sim/fault.h"
#include "sim/report.h"

namespace mlasim::sim {
namespace {

const Violation* Find(const ReplayReport& r, const std::string& buffer, const std::string& access) {
  for (const Violation& v : r.result.violations)
    if (v.buffer == buffer && AccessName(v.access) == access &&
        v.kind == ViolationKind::kOutOfBounds)
      return &v;
  return nullptr;
}

TEST(FoundingCase, BeforeTheFixDraftStep0OverrunsQAndOByThePaddedTokens) {
  auto s = BuiltinScenario("seed");
  ASSERT_TRUE(s.ok());
  auto r = Replay(*s);
  ASSERT_TRUE(r.ok());
  const StepShape& sh = r->trace.shape;
  EXPECT_EQ(sh.scheduled_tokens, 156);  // 39 x 4
  EXPECT_EQ(sh.running_tokens, 160);    // 40 x 4
  ASSERT_EQ(r->result.violations.size(), 2u);
  for (const char* access : {"read", "write"}) {
    const Violation* v = Find(*r, std::string(access) == "read" ? "q" : "o", access);
    ASSERT_NE(v, nullptr) << access;
    EXPECT_EQ(v->step, "draft_step_0");
    EXPECT_EQ(v->call, "sparse_decode");
    EXPECT_EQ(v->kernel, "asm");
    EXPECT_EQ(v->table_row, "D0b");
    EXPECT_EQ(v->first_row, 156);
    EXPECT_EQ(v->last_row, 159);
    EXPECT_EQ(v->rows_past_end, sh.running_tokens - sh.scheduled_tokens);
    EXPECT_EQ(v->work_items.size(), 4u);
    EXPECT_EQ(ConsequenceText(*v), "fault");  // exact allocator: the guard page after each buffer
  }
  // q rows are 16 heads x 576 fp8 bytes; o rows 16 heads x 512 bf16.
  EXPECT_EQ(Find(*r, "q", "read")->bytes_past_end, 4 * 16 * 576);
  EXPECT_EQ(Find(*r, "o", "write")->bytes_past_end, 4 * 16 * 512 * 2);
}

TEST(FoundingCase, AfterTheFixItIsClean) {
  auto s = BuiltinScenario("seed");
  s->engine = *GetEngineProfile("atom-2026-11", "engine");
  auto r = Replay(*s);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->clean()) << ReportText(*r);
  // The verify step's graph still runs 160 rows over a plan of 156: the pad rows of o stay
  // unwritten and are dropped (atom-mtp-flow.md §6).
  EXPECT_EQ(r->result.unwritten_pad_rows, 4);
}

TEST(FoundingCase, GuardRefusesAPlanWiderThanQOnEagerCalls) {
  // The fixed guard with the old plan width: draft step 0 is eager, so the guard fires there
  // (and not on the graph replay of the verify step).
  auto s = BuiltinScenario("seed");
  s->engine.plan_rows_guard = true;
  auto r = Replay(*s);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->result.violations.size(), 1u);
  EXPECT_EQ(r->result.violations[0].kind, ViolationKind::kGuardRefused);
  EXPECT_EQ(r->result.violations[0].step, "draft_step_0");
}

TEST(FoundingCase, B35FaultLands20To24KiBPastQ) {
  auto s = BuiltinScenario("seed-b35");
  auto r = Replay(*s);
  ASSERT_TRUE(r.ok());
  const Violation* q = Find(*r, "q", "read");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->rows, 140);
  EXPECT_EQ(ConsequenceText(*q), "fault");
  const Violation* o = Find(*r, "o", "write");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(ConsequenceText(*o), "unobserved");  // lands in its segment's slack: silent
  auto at = AttributeAddress(r->result.layout, q->first_bad_address);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  EXPECT_EQ(at->buffer, "q");
  EXPECT_FALSE(at->inside);
  EXPECT_GE(at->bytes_past_end, 20 * 1024);
  EXPECT_LE(at->bytes_past_end, 24 * 1024);
  EXPECT_EQ(at->bytes_past_end, 22528);
  EXPECT_EQ(at->row, 142);  // 140 + 22528 / 9216
  EXPECT_EQ(at->head, 7);   // (22528 % 9216) / 576
  EXPECT_EQ(at->column, 64);
  EXPECT_FALSE(at->mapped);
}

TEST(FaultLog, RocmLineWrappedSplitMidWordWithPrefixes) {
  const std::string log =
      "2026-11-03 10:00:01,112 [rank2] Memory access fault by GPU node-4 (Agent handle: "
      "0x55d0c5a0) on add\n[rank2] ress 0x7f1000200000. Reason: Page not present or supervisor "
      "privilege.\n";
  auto f = ParseFaultText(log, "--log");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->address, 0x7f1000200000ull);
  EXPECT_EQ(f->source, "rocm");
  EXPECT_EQ(f->reason, "Page not present or supervisor privilege");
}

// A log of several ranks' faults: the first address is explained and the others are named
// (other_addresses, distinct, in log order, at most kMaxOtherFaultAddresses); before round 8 the
// first was taken as the only one without a word.
TEST(FaultLog, FurtherFaultLinesAreNamedNotDropped) {
  auto line = [](int rank, const char* address) {
    return "[rank" + std::to_string(rank) + "] Memory access fault by GPU node-" +
           std::to_string(rank) + " (Agent handle: 0x1) on address " + address +
           ". Reason: Page not present or supervisor privilege.\n";
  };
  const std::string log = line(0, "0x7f1000200000") + line(1, "0x7f1000300000") +
                          line(2, "0x7f1000200000") + line(3, "(nil)") + line(4, "0x7f1000400000") +
                          line(5, "0x7f1000300000");
  auto f = ParseFaultText(log, "--log");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->address, 0x7f1000200000ull);
  EXPECT_EQ(f->other_addresses, (std::vector<uint64_t>{0x7f1000300000ull, 0x7f1000400000ull}));
  // One fault line: no others.
  auto one = ParseFaultText(line(0, "0x7f1000200000"), "--log");
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one->other_addresses.empty());
  // At most kMaxOtherFaultAddresses (16) others.
  std::string many;
  for (int i = 0; i < 40; ++i) many += line(i, ("0x7f10" + std::to_string(100000 + i)).c_str());
  auto m = ParseFaultText(many, "--log");
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->other_addresses.size(), kMaxOtherFaultAddresses);
  EXPECT_EQ(m->other_addresses.front(), 0x7f10100001ull);
}

TEST(FaultLog, NilAddressAndHsaStatus) {
  auto f = ParseFaultText(
      "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION\nMemory access fault by GPU node-1 (Agent "
      "handle: 0x1) on address (nil). Reason: Unknown.",
      "--log");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->null_address);
  ASSERT_EQ(f->hsa_status.size(), 1u);
  EXPECT_EQ(f->hsa_status[0], "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION");
}

TEST(FaultLog, ComputeSanitizerAndBareAddress) {
  auto f = ParseFaultText(
      "========= Invalid __global__ read of size 16 bytes\n=========     at mla_decode+0x1a0\n"
      "=========     by thread (3,0,0) in block (7,0,0)\n=========     Address 0x7f100015f010 "
      "is out of bounds\n========= ERROR SUMMARY: 1 error\n",
      "--log");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->address, 0x7f100015f010ull);
  EXPECT_EQ(f->reason, "read of 16 bytes");
  auto b = ParseFaultText("  0x7F00ABC  ", "--address");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->address, 0x7f00abcull);
}

TEST(FaultLog, PlainCudaErrorHasNoAddress) {
  auto f = ParseFaultText("CUDA error: an illegal memory access was encountered", "--log");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().field(), "--log");
  EXPECT_NE(f.status().message().find("no address"), std::string::npos);
}

TEST(FaultLog, MalformedLayoutIsRefusedWithThePath) {
  nlohmann::json l = {
      {"allocations", {{{"name", "q"}, {"base", "12"}, {"bytes", 4}, {"row_bytes", 1}}}}};
  auto at = AttributeAddress(l, 0x10);
  ASSERT_FALSE(at.ok());
  EXPECT_EQ(at.status().field(), "$.allocations[0].base");
}

}  // namespace
}  // namespace mlasim::sim
