// CSR walks (sim/contract.h CsrWalk): which loops of the built-in contracts are recognised and
// with which gate, which shapes are not, and the executor's fast path (idle iterations skipped)
// against the walk as written (ExecuteOptions::csr_walks = false) on adversarial indptrs: the
// same findings, with the same recorded reads (rows, work items, addresses), and the same layout.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "sim/contract.h"
#include "sim/engine.h"
#include "sim/executor.h"
#include "sim_builders.h"

namespace mlasim::sim {
namespace {

using nlohmann::json;

std::shared_ptr<const Contract> Builtin(CallKind call, const char* variant) {
  auto c = BuiltinContract(call, variant, "t");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

// The decode's `loop c` over workgroups walks [work_indptr[c], work_indptr[c + 1]): idle when
// work_indptr[c + 1] - work_indptr[c] <= 0. The reduce's `loop t` walks its tiles: idle when
// splits = reduce_indptr[t + 1] - reduce_indptr[t] < 2, i.e. splits - 1 <= 0.
TEST(CsrWalk, TheBuiltinDecodeAndReduceLoopsAreCsrWalks) {
  for (const char* variant : {"asm", "hk", "opus"}) {
    const auto c = Builtin(CallKind::kDecode, variant);
    ASSERT_NE(c, nullptr);
    const CsrWalk& w = c->program.at(0).csr;
    EXPECT_EQ(w.buffer, kLoadWorkIndptr) << variant;
    EXPECT_EQ(w.loads, 2) << variant;
    EXPECT_EQ(w.offset[0], 0);
    EXPECT_EQ(w.offset[1], 1);
    EXPECT_EQ(w.coef[0], -1);
    EXPECT_EQ(w.coef[1], 1);
    EXPECT_EQ(w.constant, 0);
    EXPECT_EQ(c->program[0].body.at(0).csr.loads, 0) << variant;  // the work items: not a walk
  }
  const auto r = Builtin(CallKind::kReduce, "mla_reduce_v1");
  ASSERT_NE(r, nullptr);
  const CsrWalk& w = r->program.at(1).csr;
  EXPECT_EQ(w.buffer, kLoadReduceIndptr);
  EXPECT_EQ(w.loads, 2);
  EXPECT_EQ(w.offset[0], 0);
  EXPECT_EQ(w.offset[1], 1);
  EXPECT_EQ(w.coef[0], -1);
  EXPECT_EQ(w.coef[1], 1);
  EXPECT_EQ(w.constant, -1);
  // FlashMLA's and FlashInfer's loops read other buffers per request; the indexer's body is a
  // write, not a walk.
  for (const char* variant : {"flashmla_dense", "flashinfer_fa3"})
    EXPECT_EQ(Builtin(CallKind::kDecode, variant)->program.at(0).csr.loads, 0) << variant;
  const auto fills = BuiltinVariants(CallKind::kIndexFill);
  ASSERT_FALSE(fills.empty());
  for (const std::string& v : fills)
    for (const Statement& st : Builtin(CallKind::kIndexFill, v.c_str())->program)
      EXPECT_EQ(st.csr.loads, 0) << v;
}

// Built by assignment, not nested braces: `{"body", body}` with `body` a json array is read as
// the array itself by g++ and wrapped in another array by clang (CWG 2137), so the asan build
// (clang) would parse another contract than the release build (g++).
json UserDecode(const json& body) {
  json loop = json::object();
  loop["loop"] = "c";
  loop["from"] = 0;
  loop["to"] = "grid";
  loop["attribute"] = "work_item";
  loop["body"] = body;
  json c = json::object();
  c["contract"] = 1;
  c["name"] = "u";
  c["call"] = "decode";
  c["variant"] = "u";
  c["source"] = "test";
  c["launch"] = json::object();
  c["launch"]["grid"] = "work_indptr_rows + 2";
  c["program"] = json::array();
  c["program"].push_back(loop);
  return c;
}

CsrWalk WalkOf(const json& body) {
  auto c = ParseContract(UserDecode(body), "user.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? c->program.at(0).csr : CsrWalk();
}

const json kRead = json::parse(R"({"read": "q", "rows": ["c", "c + 1"]})");

TEST(CsrWalk, GatesOfLetsLoopsAndIfs) {
  // `if n > 0` with n = work_indptr[1 + c] - b: gate E - B.
  CsrWalk w = WalkOf({{{"let", "b"}, {"value", "work_indptr[c]"}},
                      {{"let", "n"}, {"value", "work_indptr[1 + c] - b"}},
                      {{"if", "n > 0"}, {"body", json::array({kRead})}}});
  EXPECT_EQ(w.loads, 2);
  EXPECT_EQ(w.coef[0], -1);
  EXPECT_EQ(w.coef[1], 1);
  EXPECT_EQ(w.constant, 0);
  // `if 3 <= n`: runs when n - 3 >= 0, gate n - 2.
  w = WalkOf({{{"let", "b"}, {"value", "work_indptr[c]"}},
              {{"let", "n"}, {"value", "work_indptr[c + 1] - b"}},
              {{"if", "3 <= n"}, {"body", json::array({kRead})}}});
  EXPECT_EQ(w.constant, -2);
  // A loop from 0 to n; a loop from e (a let) to work_indptr[c - 1]: offsets 0 and -1.
  w = WalkOf({{{"let", "b"}, {"value", "work_indptr[c]"}},
              {{"let", "n"}, {"value", "work_indptr[c + 1] - b"}},
              {{"loop", "i"}, {"from", 0}, {"to", "n"}, {"body", json::array({kRead})}}});
  EXPECT_EQ(w.loads, 2);
  EXPECT_EQ(w.constant, 0);
  w = WalkOf({{{"let", "e"}, {"value", "work_indptr[c]"}},
              {{"loop", "i"}, {"from", "e"}, {"to", "work_indptr[c - 1]"}, {"body", json::array({kRead})}}});
  EXPECT_EQ(w.loads, 2);
  EXPECT_EQ(w.offset[0], 0);
  EXPECT_EQ(w.offset[1], -1);
  EXPECT_EQ(w.coef[0], -1);
  EXPECT_EQ(w.coef[1], 1);
}

TEST(CsrWalk, ShapesThatAreNotWalks) {
  const json not_walks[] = {
      // the inner loop has a `when`; a let has one; a statement after the walk
      {{{"loop", "w"}, {"from", "work_indptr[c]"}, {"to", "work_indptr[c + 1]"}, {"when", "heads"},
        {"body", json::array({kRead})}}},
      {{{"let", "b"}, {"value", "work_indptr[c]"}, {"when", "heads"}},
       {{"loop", "w"}, {"from", "b"}, {"to", "work_indptr[c + 1]"}, {"body", json::array({kRead})}}},
      {{{"loop", "w"}, {"from", "work_indptr[c]"}, {"to", "work_indptr[c + 1]"}, {"body", json::array({kRead})}},
       kRead},
      // a let that loads another buffer, or indexes by another variable, or does arithmetic
      {{{"let", "x"}, {"value", "work_info[c].kv_end"}},
       {{"loop", "w"}, {"from", "work_indptr[c]"}, {"to", "work_indptr[c + 1]"}, {"body", json::array({kRead})}}},
      {{{"loop", "w"}, {"from", "work_indptr[heads]"}, {"to", "work_indptr[c + 1]"},
        {"body", json::array({kRead})}}},
      {{{"loop", "w"}, {"from", "work_indptr[c]"}, {"to", "work_indptr[c + 1] + 1"},
        {"body", json::array({kRead})}}},
      {{{"loop", "w"}, {"from", "work_indptr[2 * c]"}, {"to", "work_indptr[c + 1]"},
        {"body", json::array({kRead})}}},
      // two loads of different buffers, three elements, bounds over the loop variable
      {{{"loop", "w"}, {"from", "work_indptr[c]"}, {"to", "kv_indptr[c + 1]"}, {"body", json::array({kRead})}}},
      {{{"let", "a"}, {"value", "work_indptr[c]"}},
       {{"let", "b"}, {"value", "work_indptr[c + 1] - a"}},
       {{"loop", "w"}, {"from", "a"}, {"to", "work_indptr[c + 2]"}, {"body", json::array({kRead})}}},
      {{{"loop", "w"}, {"from", "c"}, {"to", "work_indptr[c + 1]"}, {"body", json::array({kRead})}}},
      // conditions that are not one comparison, or not monotone in the range
      {{{"let", "n"}, {"value", "work_indptr[c]"}}, {{"if", "n != 0"}, {"body", json::array({kRead})}}},
      {{{"let", "n"}, {"value", "work_indptr[c]"}}, {{"if", "n"}, {"body", json::array({kRead})}}},
      {{{"let", "n"}, {"value", "work_indptr[c]"}},
       {{"if", "n > 0 && heads > 0"}, {"body", json::array({kRead})}}},
      // a constant gate (nothing loaded), a huge constant (not exact in 64 bits)
      {{{"loop", "w"}, {"from", 0}, {"to", 4}, {"body", json::array({kRead})}}},
      {{{"let", "n"}, {"value", "work_indptr[c]"}},
       {{"if", "n > 4611686018427387904"}, {"body", json::array({kRead})}}},
      // a read, not a loop or an if
      json::array({kRead}),
  };
  for (const json& body : not_walks) EXPECT_EQ(WalkOf(body).loads, 0) << body.dump();
}

// Every field of every finding, the pad rows and the layout.
std::string Dump(const ExecutionResult& r) {
  std::ostringstream o;
  for (const Violation& v : r.violations) {
    o << ViolationSignature(v) << " kind " << static_cast<int>(v.kind) << " call " << v.call_index
      << " " << v.table_row << " " << v.kernel << " rows " << v.rows << "x" << v.row_bytes << " ["
      << v.first_row << ", " << v.last_row << "] past " << v.rows_past_end << "/"
      << v.bytes_past_end << " before " << v.rows_before_start << "/" << v.bytes_before_start
      << " works";
    for (int32_t w : v.work_items) o << " " << w;
    o << " " << ConsequenceText(v) << " @" << v.first_bad_address << " " << v.cause << " | "
      << v.detail << "\n";
  }
  o << "pad rows " << r.unwritten_pad_rows << ", layout of call " << r.layout_call << ": "
    << r.layout.dump();
  return o.str();
}

// What an adversarial indptr does to a plan's work_indptr and reduce_indptr (or to the calls).
struct Mutation {
  const char* name;
  std::function<void(ref::Int32Buffer&)> buffer;
  int32_t grid_factor = 0;  // > 0: kernel calls launch this many times the indptr's entries
};

void Written(ref::Int32Buffer& b, const std::function<void(size_t, int32_t&)>& f) {
  for (size_t i = 0; i < b.data.size(); ++i)
    if (b.cells.empty() || b.cells[i] != ref::Cell::kUnwritten) f(i, b.data[i]);
}

const Mutation kMutations[] = {
    {"as planned", [](ref::Int32Buffer&) {}},
    {"every range empty", [](ref::Int32Buffer& b) { Written(b, [](size_t, int32_t& v) { v = 0; }); }},
    {"decreasing", [](ref::Int32Buffer& b) {
       Written(b, [&](size_t i, int32_t& v) { v = static_cast<int32_t>(b.data.size() - i); });
     }},
    {"poison entries", [](ref::Int32Buffer& b) {
       if (b.cells.empty()) return;
       for (size_t i : {size_t{0}, b.data.size() / 2, b.data.size() - 1}) {
         b.cells[i] = ref::Cell::kUnwritten;
         b.data[i] = ref::kPoisonValue;
       }
     }},
    {"undefined cells (loadable)", [](ref::Int32Buffer& b) {
       for (ref::Cell& c : b.cells)
         if (c == ref::Cell::kWritten) c = ref::Cell::kUndefined;
     }},
    {"entries past the buffer's end", [](ref::Int32Buffer& b) {
       b.data.resize(b.data.size() / 2);
       if (!b.cells.empty()) b.cells.resize(b.data.size());
     }},
    {"negative and huge entries", [](ref::Int32Buffer& b) {
       Written(b, [](size_t i, int32_t& v) {
         v = i % 3 == 0 ? -5 : i % 3 == 1 ? v : (i % 5 == 2 ? INT32_MAX : v + 7);
       });
     }},
    {"pairs of equal entries, then one-element ranges", [](ref::Int32Buffer& b) {
       Written(b, [](size_t i, int32_t& v) { v = static_cast<int32_t>(i / 2 + (i % 7 == 0)); });
     }},
    {"a grid larger than the entries", [](ref::Int32Buffer&) {}, 3},
};

struct World {
  const char* name;
  Scenario scenario;
};

std::vector<World> Worlds() {
  std::vector<World> out;
  out.push_back({"sparse, atom-2026-08", test::WorkedExample(true, "atom-2026-08")});
  out.push_back({"dense, atom-2026-11", test::WorkedExample(false, "atom-2026-11")});
  World opus{"sparse, opus", test::WorkedExample(true, "atom-2026-08")};
  opus.scenario.kernel = "opus";
  out.push_back(opus);
  // A user contract whose walk is lets and an if, attributed per workgroup (work_item), with a
  // grid two past the entries.
  auto user = ParseContract(
      UserDecode({{{"let", "b"}, {"value", "work_indptr[c]"}},
                  {{"let", "n"}, {"value", "work_indptr[1 + c] - b"}},
                  {{"if", "n > 1"},
                   {"body", {{{"read", "work_info"}, {"rows", {"b", "b + n"}}}, kRead}}}}),
      "user.json");
  EXPECT_TRUE(user.ok()) << user.status().ToString();
  World u{"sparse, a user's walk", test::WorkedExample(true, "atom-2026-08")};
  u.scenario.contracts.push_back(std::make_shared<const Contract>(std::move(*user)));
  out.push_back(u);
  return out;
}

TEST(CsrWalk, TheFastPathFindsWhatTheWalkAsWrittenFinds) {
  for (const World& world : Worlds()) {
    auto planned = ExpandStep(world.scenario);
    ASSERT_TRUE(planned.ok()) << world.name << ": " << planned.status().ToString();
    for (const Mutation& m : kMutations) {
      Trace t = *planned;
      for (PlanSnapshot& p : t.plans) {
        if (p.dialect) continue;
        m.buffer(p.plan.work_indptr);
        m.buffer(p.plan.reduce_indptr);
      }
      if (m.grid_factor > 0) {
        for (Call& c : t.calls) {
          if (c.plan < 0 || t.plans[c.plan].dialect) continue;
          const ref::Plan& p = t.plans[c.plan].plan;
          const int64_t entries =
              c.kind == CallKind::kDecode ? p.work_indptr.size() : p.reduce_indptr.size();
          if (c.kind == CallKind::kDecode || c.kind == CallKind::kReduce)
            c.launch_grid = static_cast<int32_t>(m.grid_factor * entries);
        }
      }
      ExecuteOptions fast, walk;
      walk.csr_walks = false;
      const ExecutionResult a = Execute(world.scenario, t, fast);
      const ExecutionResult b = Execute(world.scenario, t, walk);
      EXPECT_EQ(Dump(a), Dump(b)) << world.name << ", " << m.name;
      EXPECT_EQ(b.csr_skipped, 0);
      if (m.grid_factor > 0 || std::string(m.name) == "as planned" ||
          std::string(m.name) == "every range empty") {
        EXPECT_GT(a.csr_skipped, 0) << world.name << ", " << m.name;
      }
    }
  }
}

// The findings an adversarial indptr makes are there with the fast path (not only equal):
// a poisoned entry is a read of stale work_indptr memory, a grid past the entries a read past
// work_indptr's end.
// The fast path skips runs of equal, written entries eight at a time (k <= 0 and coefficients
// -1, 1: the decode's and the reduce's walks): one entry of the equal tail left unwritten with
// the value it had, at each of nine positions (so that one is the ninth entry of an eight-wide
// block whatever the block's start), is read as the walk as written reads it.
TEST(CsrWalk, AnUnwrittenEntryInAnEqualTailIsReadAsTheWalkReadsIt) {
  for (const World& world : Worlds()) {
    auto planned = ExpandStep(world.scenario);
    ASSERT_TRUE(planned.ok()) << world.name << ": " << planned.status().ToString();
    for (int64_t j = 0; j < 9; ++j) {
      Trace t = *planned;
      for (PlanSnapshot& p : t.plans) {
        if (p.dialect) continue;
        for (ref::Int32Buffer* b : {&p.plan.work_indptr, &p.plan.reduce_indptr}) {
          const int64_t at = b->size() - 2 - j;
          if (at > 0 && !b->cells.empty()) b->cells[at] = ref::Cell::kUnwritten;
        }
      }
      ExecuteOptions fast, walk;
      walk.csr_walks = false;
      EXPECT_EQ(Dump(Execute(world.scenario, t, fast)), Dump(Execute(world.scenario, t, walk)))
          << world.name << ", entry size - " << 2 + j;
    }
  }
}

// A walk whose equal entries are not idle (`if n >= 0`: gate n + 1) is never skipped over
// equal entries.
TEST(CsrWalk, AWalkWithAPositiveConstantRunsItsEqualEntries) {
  const json body = {
      {{"let", "b"}, {"value", "work_indptr[c]"}},
      {{"let", "n"}, {"value", "work_indptr[c + 1] - b"}},
      {{"if", "n >= 0"},
       {"body",
        json::array({json::parse(R"({"read": "q", "rows": ["c + 1000000", "c + 1000001"]})")})}}};
  auto parsed = ParseContract(UserDecode(body), "user.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->program.at(0).csr.loads, 2);
  EXPECT_EQ(parsed->program[0].csr.constant, 1);
  const auto user = std::make_shared<const Contract>(std::move(*parsed));
  for (const World& world : Worlds()) {
    Scenario s = world.scenario;
    s.contracts.push_back(user);
    auto planned = ExpandStep(s);
    ASSERT_TRUE(planned.ok()) << world.name << ": " << planned.status().ToString();
    ExecuteOptions fast, walk;
    walk.csr_walks = false;
    const ExecutionResult a = Execute(s, *planned, fast);
    EXPECT_EQ(Dump(a), Dump(Execute(s, *planned, walk))) << world.name;
    EXPECT_FALSE(a.violations.empty()) << world.name;
  }
}

TEST(CsrWalk, AdversarialIndptrsKeepTheirFindings) {
  const Scenario s = test::WorkedExample(true, "atom-2026-08");
  auto planned = ExpandStep(s);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  auto has = [](const ExecutionResult& r, ViolationKind kind, const std::string& suffix) {
    for (const Violation& v : r.violations)
      if (v.kind == kind && v.buffer.size() >= suffix.size() &&
          v.buffer.compare(v.buffer.size() - suffix.size(), suffix.size(), suffix) == 0)
        return true;
    return false;
  };
  Trace poisoned = *planned;
  for (PlanSnapshot& p : poisoned.plans) kMutations[3].buffer(p.plan.work_indptr);
  EXPECT_TRUE(has(Execute(s, poisoned), ViolationKind::kUninitializedRead, "work_indptr"));
  EXPECT_FALSE(has(Execute(s, *planned), ViolationKind::kUninitializedRead, "work_indptr"));
  Trace wide = *planned;
  for (Call& c : wide.calls)
    if (c.kind == CallKind::kDecode && c.plan >= 0)
      c.launch_grid = static_cast<int32_t>(2 * wide.plans[c.plan].plan.work_indptr.size());
  EXPECT_TRUE(has(Execute(s, wide), ViolationKind::kOutOfBounds, "work_indptr"));
  EXPECT_FALSE(has(Execute(s, *planned), ViolationKind::kOutOfBounds, "work_indptr"));
}

}  // namespace
}  // namespace mlasim::sim
