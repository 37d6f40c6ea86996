// Fault attribution (sim/fault.h AttributeAddress): underflows before a buffer's start, the
// nearer-boundary rule between two buffers, page-granular (ROCm) addresses as row ranges, the
// replay's accesses behind the attributed rows, and every error return of the layout's new keys.
#include "sim/fault.h"

#include <gtest/gtest.h>

#include <climits>
#include <functional>

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


// A layout as `replay --layout-out` writes it, of three allocations: q (shaped), kv_indices and
// an empty one; every inconsistency below was accepted before and printed nonsense (an
// attribution by a 2^63-byte row, a head past the buffer's heads, an answer depending on the
// order of two overlapping allocations). Mutant: ValidateLayout of 219489c (types and ranges
// only) accepts every case.
nlohmann::json FullLayout() {
  nlohmann::json l = QLayout();
  l["allocations"][0]["dtype"] = "bf16";
  l["allocations"].push_back(
      {{"name", "kv_indices"}, {"base", "0x400000"}, {"bytes", 4096}, {"row_bytes", 4},
       {"dtype", "int32"}, {"mapped_begin", "0x400000"}, {"mapped_end", "0x401000"}});
  l["allocations"].push_back({{"name", "empty"}, {"base", "0x500000"}, {"bytes", 0},
                              {"row_bytes", 8}});
  l["allocator"] = "exact";
  l["call"] = 6;
  l["has_violation"] = true;
  l["page_bytes"] = 4096;
  l["segment_bytes"] = 2097152;
  l["accesses"] = {{{"buffer", "q"}, {"first_row", 10}, {"last_row", 13}, {"access", "read"},
                    {"call_index", 6}}};
  return l;
}

TEST(FaultLayout, TheFullLayoutIsAccepted) {
  EXPECT_TRUE(ValidateLayout(FullLayout()).ok()) << ValidateLayout(FullLayout()).ToString();
}

TEST(FaultLayout, EveryInconsistentOrUnknownKeyIsRefusedWithItsPath) {
  struct Bad {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* path;
    const char* reason;  // a fragment of the message
  };
  auto q = [](nlohmann::json& l) -> nlohmann::json& { return l["allocations"][0]; };
  const Bad bad[] = {
      {"row of 2^63-1 bytes", [&](auto& l) { q(l)["row_bytes"] = INT64_MAX; },
       "$.allocations[0].row_bytes", "is not heads x cols x elem_bytes = 16 x 36 x 2"},
      {"cols disagreeing with row_bytes", [&](auto& l) { q(l)["cols"] = 7; },
       "$.allocations[0].row_bytes", "1152 is not heads x cols x elem_bytes = 16 x 7 x 2"},
      {"heads x cols x elem_bytes beyond 64 bits",
       [&](auto& l) {
         q(l).erase("dtype");
         q(l)["heads"] = INT32_MAX, q(l)["cols"] = INT32_MAX, q(l)["elem_bytes"] = 8;
       },
       "$.allocations[0].row_bytes", "is not heads x cols x elem_bytes"},
      {"bytes not whole rows", [&](auto& l) { q(l)["bytes"] = 11521; }, "$.allocations[0].bytes",
       "11521 is not a whole number of rows of 1152 bytes"},
      {"heads without cols", [&](auto& l) { q(l).erase("cols"); }, "$.allocations[0].heads",
       "heads and cols come together"},
      {"elem_bytes 3", [&](auto& l) { q(l)["elem_bytes"] = 3; }, "$.allocations[0].elem_bytes",
       "must be 1, 2, 4 or 8"},
      {"elem_bytes unlike dtype", [&](auto& l) { q(l)["dtype"] = "fp32"; },
       "$.allocations[0].elem_bytes", "2 disagrees with dtype fp32 (4 bytes an element)"},
      {"dtype int7", [&](auto& l) { q(l)["dtype"] = "int7"; }, "$.allocations[0].dtype",
       "unknown dtype 'int7'"},
      {"unknown allocation key", [&](auto& l) { q(l)["head"] = 3; }, "$.allocations[0].head",
       "unknown key"},
      {"unknown top-level key", [](auto& l) { l["page_byte"] = 65536; }, "$.page_byte",
       "unknown key"},
      {"unknown access key", [](auto& l) { l["accesses"][0]["rows"] = 1; }, "$.accesses[0].rows",
       "unknown key"},
      {"allocator foo", [](auto& l) { l["allocator"] = "foo"; }, "$.allocator",
       "must be \"exact\" or \"caching\""},
      {"call -1", [](auto& l) { l["call"] = -1; }, "$.call", "must be in 0..2147483647 (got -1)"},
      {"has_violation 1", [](auto& l) { l["has_violation"] = 1; }, "$.has_violation",
       "must be true or false"},
      {"segment not pages", [](auto& l) { l["segment_bytes"] = 1000; }, "$.segment_bytes",
       "must be a multiple of page_bytes (4096)"},
      {"first_row after last_row", [](auto& l) { l["accesses"][0]["first_row"] = 200; },
       "$.accesses[0].first_row", "200 is after last_row 13"},
      {"access to no allocation", [](auto& l) { l["accesses"][0]["buffer"] = "o"; },
       "$.accesses[0].buffer", "'o' names no allocation of the layout"},
      {"access kind", [](auto& l) { l["accesses"][0]["access"] = "poke"; },
       "$.accesses[0].access", "must be \"read\", \"write\" or \"run\""},
      {"negative call_index", [](auto& l) { l["accesses"][0]["call_index"] = -1; },
       "$.accesses[0].call_index", "must be in 0..2147483647"},
      {"a name twice",
       [](auto& l) { l["allocations"][2]["name"] = "q"; }, "$.allocations[2].name",
       "'q' repeats $.allocations[0].name"},
      {"an empty name", [](auto& l) { l["allocations"][2]["name"] = ""; },
       "$.allocations[2].name", "must not be empty"},
      {"a duplicate of q (same range)",
       [&](auto& l) {
         nlohmann::json dup = q(l);
         dup["name"] = "q_dup";
         l["allocations"].push_back(dup);
       },
       "$.allocations[3]", "q_dup at 0x300000 overlaps $.allocations[0] (q, bytes "
                           "0x300000..0x302d00): allocations are disjoint"},
      {"a buffer inside q, listed first",
       [&](auto& l) {
         const nlohmann::json view = {
             {"name", "view"}, {"base", "0x300100"}, {"bytes", 16}, {"row_bytes", 4}};
         l["allocations"].insert(l["allocations"].begin(), view);
       },
       "$.allocations[1]", "q at 0x300000 overlaps $.allocations[0] (view"},
      {"an empty buffer at q's base",
       [](auto& l) { l["allocations"][2]["base"] = "0x300000"; }, "$.allocations[2]",
       "empty at 0x300000 overlaps $.allocations[0] (q"},
  };
  for (const Bad& b : bad) {
    nlohmann::json l = FullLayout();
    b.edit(l);
    const Status st = ValidateLayout(l);
    EXPECT_FALSE(st.ok()) << "accepted: " << b.what;
    if (st.ok()) continue;
    EXPECT_EQ(st.field(), b.path) << b.what;
    EXPECT_NE(st.message().find(b.reason), std::string::npos) << b.what << ": " << st.message();
    // The attribution refuses it the same way: no answer computed from it.
    EXPECT_FALSE(AttributeAddress(l, 0x300000 + 11520 + 16).ok()) << b.what;
  }
}

TEST(FaultLayout, ABufferEndingWhereTheNextStartsIsNotAnOverlap) {
  nlohmann::json l = FullLayout();
  l["allocations"][1]["base"] = "0x302d00";  // q's end
  l["allocations"][1].erase("mapped_begin");
  l["allocations"][1].erase("mapped_end");
  l["allocations"][2]["base"] = "0x303d00";  // kv_indices' end, an empty buffer
  EXPECT_TRUE(ValidateLayout(l).ok()) << ValidateLayout(l).ToString();
}

TEST(FaultLayout, AFlatStridedSpanCountsItsPartialLastRow) {
  // A [4, 3] int32 slice of a [4, 8] tensor: rows of 32 bytes, the span 3 x 32 + 12 bytes.
  nlohmann::json l = {
      {"allocations",
       {{{"name", "s"}, {"base", "0x100000"}, {"bytes", 108}, {"row_bytes", 32}}}}};
  auto at = AttributeAddress(l, 0x100000 + 108 + 4);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  EXPECT_EQ(at->rows, 4);  // not 108 / 32 = 3
  EXPECT_EQ(at->row, 3);
}

}  // namespace
}  // namespace mlasim::sim
