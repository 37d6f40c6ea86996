// Fault attribution (sim/fault.h AttributeAddress): underflows before a buffer's start, the
// nearer-boundary rule between two buffers, page-granular (ROCm) addresses as row ranges, the
// replay's accesses behind the attributed rows, and every error return of the layout's new keys.
#include "sim/fault.h"

#include <gtest/gtest.h>

namespace mlasim::sim {
namespace {

// Two buffers far apart, each at the start of its own page: `a` (1000 rows of 4 bytes) at
// 0x100000 and kv_indices (1024 rows of 4 bytes) at 0x200000.
nlohmann::json TwoBuffers() {
  return {{"allocations",
           {{{"name", "a"}, {"base", "0x100000"}, {"bytes", 4000}, {"row_bytes", 4}},
            {{"name", "kv_indices"}, {"base", "0x200000"}, {"bytes", 4096}, {"row_bytes", 4}}}}};
}

TEST(FaultUnderflow, FourBytesBeforeKvIndicesIsRowMinusOneOfKvIndices) {
  auto at = AttributeAddress(TwoBuffers(), 0x200000 - 4);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  EXPECT_EQ(at->buffer, "kv_indices");
  EXPECT_TRUE(at->before_start);
  EXPECT_FALSE(at->inside);
  EXPECT_EQ(at->offset, -4);
  EXPECT_EQ(at->row, -1);
  EXPECT_EQ(at->first_row, -1);
  EXPECT_EQ(at->last_row, -1);
  EXPECT_EQ(at->column, 0);
  EXPECT_EQ(at->rows, 1024);
  // The other reading is given, not hidden: 0x200000 - 4 - (0x100000 + 4000) bytes past a.
  EXPECT_EQ(at->alternative, "or 1044572 bytes past the end of a");
  EXPECT_NE(at->text.find("4 bytes before the start of kv_indices = row -1"), std::string::npos)
      << at->text;
}

TEST(FaultUnderflow, OneByteBeforeTheStartIsByteThreeOfRowMinusOne) {
  auto at = AttributeAddress(TwoBuffers(), 0x200000 - 1);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->buffer, "kv_indices");
  EXPECT_EQ(at->offset, -1);
  EXPECT_EQ(at->row, -1);
  EXPECT_EQ(at->column, 3);
}

TEST(FaultUnderflow, TheFirstByteIsInsideRowZero) {
  auto at = AttributeAddress(TwoBuffers(), 0x200000);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->buffer, "kv_indices");
  EXPECT_TRUE(at->inside);
  EXPECT_FALSE(at->before_start);
  EXPECT_EQ(at->row, 0);
  EXPECT_EQ(at->alternative, "");
}

TEST(FaultUnderflow, JustPastTheEndOfTheBufferBelowStaysAnOverrun) {
  // The end of a (0x100fa0) is much nearer than the start of kv_indices.
  auto at = AttributeAddress(TwoBuffers(), 0x100000 + 4000);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->buffer, "a");
  EXPECT_FALSE(at->before_start);
  EXPECT_FALSE(at->inside);
  EXPECT_EQ(at->bytes_past_end, 0);
  EXPECT_EQ(at->row, 1000);
  EXPECT_EQ(at->alternative, "or 1044576 bytes before the start of kv_indices");
}

TEST(FaultUnderflow, TheMappingOfTheBufferAboveWins) {
  // Nearer to a's end, but inside kv_indices' mapping: an underflow of kv_indices.
  nlohmann::json l = TwoBuffers();
  l["allocations"][1]["mapped_begin"] = "0x100000";
  l["allocations"][1]["mapped_end"] = "0x201000";
  auto at = AttributeAddress(l, 0x100000 + 4008);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->buffer, "kv_indices");
  EXPECT_TRUE(at->before_start);
  EXPECT_TRUE(at->mapped);
}

TEST(FaultUnderflow, TheRoundOneRuleMutantNamesTheFarEndOfTheBufferBelow) {
  // The property the registry's fault-attributed-to-buffer-below mutant must fail.
  auto at = AttributeAddress(TwoBuffers(), 0x200000 - 4, "--address", 0,
                             FaultMutant::kAttributeToBufferBelow);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->buffer, "a");
  EXPECT_FALSE(at->before_start);
  EXPECT_EQ(at->bytes_past_end, 1044572);
}

TEST(FaultUnderflow, MoreThanOneGiBBeforeEveryAllocationIsRefused) {
  nlohmann::json l = {
      {"allocations",
       {{{"name", "q"}, {"base", "0x100000000"}, {"bytes", 16}, {"row_bytes", 16}}}}};
  auto far = AttributeAddress(l, 0x100000000ull - (uint64_t{1} << 30) - 1);
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.status().field(), "--address");
  EXPECT_NE(far.status().message().find("before every allocation"), std::string::npos);
  auto limit = AttributeAddress(l, 0x100000000ull - (uint64_t{1} << 30));  // exactly 1 GiB
  ASSERT_TRUE(limit.ok());
  EXPECT_EQ(limit->buffer, "q");
  EXPECT_EQ(limit->row, -(int64_t{1} << 26));
}

// q: 10 rows of 1152 bytes (16 heads x 36 bf16 columns) at 0x300000.
nlohmann::json QLayout() {
  return {{"allocations",
           {{{"name", "q"},
             {"base", "0x300000"},
             {"bytes", 11520},
             {"row_bytes", 1152},
             {"heads", 16},
             {"cols", 36},
             {"elem_bytes", 2}}}}};
}

TEST(FaultPage, APageInsideTheBufferIsTheRangeOfRowsItCovers) {
  auto at = AttributeAddress(QLayout(), 0x300000 + 8192, "--address", 4096);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->buffer, "q");
  EXPECT_EQ(at->page_bytes, 4096);
  EXPECT_EQ(at->first_row, 7);  // 8192 / 1152
  EXPECT_EQ(at->last_row, 10);  // (8192 + 4095) / 1152: the page runs past the last row
  EXPECT_EQ(at->head, -1);      // which byte of the page is unknown
  EXPECT_EQ(at->column, -1);
  EXPECT_NE(at->text.find("the 4096-byte page covers rows 7..10"), std::string::npos) << at->text;
  // The same address as an exact byte: one row, head and column.
  auto exact = AttributeAddress(QLayout(), 0x300000 + 8192);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->page_bytes, 0);
  EXPECT_EQ(exact->row, 7);
  EXPECT_EQ(exact->head, 1);     // byte 128 of row 7: head 128 / 72
  EXPECT_EQ(exact->column, 28);  // (128 % 72) / 2
}

TEST(FaultPage, APageBeforeTheStartGivesNegativeRows) {
  nlohmann::json l = {
      {"allocations",
       {{{"name", "kv_indices"}, {"base", "0x400000"}, {"bytes", 4096}, {"row_bytes", 1024}}}}};
  auto at = AttributeAddress(l, 0x400000 - 4096, "--address", 4096);
  ASSERT_TRUE(at.ok());
  EXPECT_TRUE(at->before_start);
  EXPECT_EQ(at->first_row, -4);
  EXPECT_EQ(at->last_row, -1);
}

TEST(FaultPage, ANegativePageSizeIsRefused) {
  auto at = AttributeAddress(QLayout(), 0x300000, "--page-bytes", -1);
  ASSERT_FALSE(at.ok());
  EXPECT_EQ(at.status().field(), "--page-bytes");
}

TEST(FaultAccesses, TheReplayCallAndWorkItemsBehindTheRowsAreNamed) {
  nlohmann::json l = TwoBuffers();
  l["accesses"] = {{{"call_index", 3},
                    {"step", "verify"},
                    {"call", "sparse_decode"},
                    {"buffer", "kv_indices"},
                    {"access", "read"},
                    {"first_row", -2},
                    {"last_row", -1},
                    {"work_items", {0, 5}}},
                   {{"buffer", "kv_indices"}, {"first_row", 1024}, {"last_row", 1030}},
                   {{"buffer", "a"}, {"first_row", -1}, {"last_row", -1}}};
  auto at = AttributeAddress(l, 0x200000 - 4);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  ASSERT_EQ(at->accesses.size(), 1u);  // rows -2..-1 of kv_indices meet row -1; the others not
  EXPECT_EQ(at->accesses[0].call_index, 3);
  EXPECT_EQ(at->accesses[0].call, "sparse_decode");
  EXPECT_EQ(at->accesses[0].work_items, (std::vector<int32_t>{0, 5}));
  EXPECT_NE(at->text.find("call 3 (verify / sparse_decode) reads rows -2..-1 (work items 0,5)"),
            std::string::npos)
      << at->text;
}

TEST(FaultLayout, EveryNewKeyIsCheckedWithItsPath) {
  struct Bad {
    const char* key;
    nlohmann::json value;
    const char* path;
  };
  const Bad bad[] = {
      {"page_bytes", 0, "$.page_bytes"},
      {"page_bytes", (int64_t{1} << 30) + 1, "$.page_bytes"},
      {"page_bytes", "4096", "$.page_bytes"},
      {"accesses", nlohmann::json::object(), "$.accesses"},
      {"accesses", {1}, "$.accesses[0]"},
      {"accesses", {{{"first_row", 0}, {"last_row", 0}}}, "$.accesses[0].buffer"},
      {"accesses", {{{"buffer", "a"}, {"last_row", 0}}}, "$.accesses[0].first_row"},
      {"accesses",
       {{{"buffer", "a"}, {"first_row", 0}, {"last_row", 0.5}}},
       "$.accesses[0].last_row"},
      {"accesses",
       {{{"buffer", "a"}, {"first_row", 0}, {"last_row", 0}, {"step", 1}}},
       "$.accesses[0].step"},
      {"accesses",
       {{{"buffer", "a"}, {"first_row", 0}, {"last_row", 0}, {"call_index", "1"}}},
       "$.accesses[0].call_index"},
      {"accesses",
       {{{"buffer", "a"}, {"first_row", 0}, {"last_row", 0}, {"work_items", 1}}},
       "$.accesses[0].work_items"},
      {"accesses",
       {{{"buffer", "a"}, {"first_row", 0}, {"last_row", 0}, {"work_items", {int64_t{1} << 31}}}},
       "$.accesses[0].work_items[0]"},
  };
  for (const Bad& b : bad) {
    nlohmann::json l = TwoBuffers();
    l[b.key] = b.value;
    auto at = AttributeAddress(l, 0x100000);
    ASSERT_FALSE(at.ok()) << b.path;
    EXPECT_EQ(at.status().field(), b.path);
  }
  // The limits themselves are accepted.
  for (int64_t page : {int64_t{1}, int64_t{1} << 30}) {
    nlohmann::json l = TwoBuffers();
    l["page_bytes"] = page;
    EXPECT_TRUE(AttributeAddress(l, 0x100000).ok()) << page;
  }
}

}  // namespace
}  // namespace mlasim::sim
