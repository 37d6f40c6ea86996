// Compiled loop bodies (sim/flat.h, round 7 of issue 10 in docs/performance.md): which loops of
// the built-in contracts compile and which bodies stay with the interpreter (the generic path),
// and the compiled form against the interpreter (ExecuteOptions::flat = false) on generated
// plans: the same findings, every field, the same layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/scenario_gen.h"
#include "ref/limits.h"
#include "sim/contract.h"
#include "sim/engine.h"
#include "sim/executor.h"
#include "sim/flat.h"
#include "tests/sim/sim_builders.h"

namespace mlasim::fuzz {
namespace {

using nlohmann::json;
using sim::CallKind;
using sim::Contract;
using sim::Statement;

std::shared_ptr<const Contract> Builtin(CallKind call, const char* variant) {
  auto c = sim::BuiltinContract(call, variant, "t");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

TEST(FlatBody, TheBuiltinDecodeAndReduceLoopsCompile) {
  for (const char* variant : {"asm", "hk", "opus"}) {
    const auto c = Builtin(CallKind::kDecode, variant);
    ASSERT_NE(c, nullptr);
    ASSERT_NE(c->program.at(0).flat, nullptr) << variant;  // loop c, its work items inside
    const sim::FlatBody& f = *c->program[0].flat;
    // loop w; the row of lets; kv_len; q, o, logits, attn_lse; batch_idx; the gather; the
    // KV-block loop (the kv_indices read with `when` 0 never runs: no record).
    ASSERT_EQ(f.records.size(), 10u) << variant;
    EXPECT_EQ(f.records[0].kind, sim::FlatRecord::Kind::kLoop);
    EXPECT_EQ(f.records[0].body_end, 10);
    EXPECT_EQ(f.records[1].kind, sim::FlatRecord::Kind::kLetRow);
    EXPECT_EQ(f.records[2].kind, sim::FlatRecord::Kind::kLetLin);
    EXPECT_EQ(f.records[3].kind, sim::FlatRecord::Kind::kAccess);
    EXPECT_EQ(f.records[8].kind, sim::FlatRecord::Kind::kGather);
    EXPECT_EQ(f.records[9].kind, sim::FlatRecord::Kind::kLoop);
    EXPECT_TRUE(f.records[9].empty_body);
    // The work item runs whole (FlatRecord::decode_item) while every slot is defined.
    EXPECT_TRUE(f.records[0].decode_item) << variant;
    for (size_t k = 1; k < f.records.size(); ++k) EXPECT_FALSE(f.records[k].decode_item) << k;
    for (const sim::FlatRecord& rec : f.records) EXPECT_FALSE(rec.load_then_accesses);
    // `index_rows / 16 + 1` (the KV-block bound) and `page_size == 1` are per call.
    EXPECT_EQ(c->hoisted.size(), 2u) << variant;
    EXPECT_GE(c->one_slot, sim::kLaunchVarCount);
  }
  const auto r = Builtin(CallKind::kReduce, "mla_reduce_v1");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->program.at(1).flat != nullptr, true);  // loop t: lets, if, loop i, write o
  std::string whole;  // the loops whose body runs as one step
  for (const sim::FlatRecord& rec : r->program[1].flat->records) {
    EXPECT_FALSE(rec.decode_item);
    whole += rec.load_then_accesses ? 'L' : '.';
  }
  EXPECT_EQ(whole, "....L....");  // loop i: let row, the logits and attn_lse reads
}

// page_count_underflows = 1 bounds the KV-block loop by `u32(kv_len - 1) / 16 + 1`: u32 has no
// compiled form, so the work item's body, and the workgroup loop's, stay with the interpreter.
TEST(FlatBody, WhatTheCompiledFormCannotExpressIsInterpreted) {
  const auto asm_decode = Builtin(CallKind::kDecode, "asm");
  ASSERT_NE(asm_decode, nullptr);
  auto underflow = sim::WithConstants(asm_decode, {{"page_count_underflows", 1}});
  ASSERT_TRUE(underflow.ok()) << underflow.status().ToString();
  const Statement& c = (*underflow)->program.at(0);
  EXPECT_EQ(c.flat, nullptr);
  EXPECT_EQ(c.body.at(0).flat, nullptr);  // loop w
  // A user's rows through min(): not a form. The same rows written plainly: compiled.
  auto user = [](const std::string& end) {
    json read = json::object();
    read["read"] = "q";
    read["rows"] = json::array({"c", end});
    json loop = json::object();
    loop["loop"] = "c";
    loop["from"] = 0;
    loop["to"] = "grid";
    loop["body"] = json::array({read});
    json doc = json::object();
    doc["contract"] = 1;
    doc["name"] = "u";
    doc["call"] = "decode";
    doc["variant"] = "u";
    doc["source"] = "test";
    doc["launch"] = json::object();
    doc["launch"]["grid"] = "work_indptr_rows - 1";
    doc["program"] = json::array({loop});
    auto c = sim::ParseContract(doc, "user.json");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? c->program.at(0).flat : nullptr;
  };
  EXPECT_EQ(user("min(c + 1, q_rows)"), nullptr);
  EXPECT_EQ(user("c / heads"), nullptr);  // a division by a variable
  EXPECT_NE(user("c + 1"), nullptr);
  EXPECT_NE(user("2 * c - heads + 3"), nullptr);
}

// Every field of every finding, the pad rows and the layout.
std::string Dump(const sim::ExecutionResult& r) {
  std::ostringstream o;
  for (const sim::Violation& v : r.violations) {
    o << sim::ViolationSignature(v) << " kind " << static_cast<int>(v.kind) << " call "
      << v.call_index << " " << v.table_row << " " << v.kernel << " rows " << v.rows << "x"
      << v.row_bytes << " [" << v.first_row << ", " << v.last_row << "] past " << v.rows_past_end
      << "/" << v.bytes_past_end << " before " << v.rows_before_start << "/"
      << v.bytes_before_start << " works";
    for (int32_t w : v.work_items) o << " " << w;
    o << " " << sim::ConsequenceText(v) << " @" << v.first_bad_address << " " << v.cause << " | "
      << v.detail << "\n";
  }
  o << "pad rows " << r.unwritten_pad_rows << ", layout of call " << r.layout_call << ": "
    << r.layout.dump();
  return o.str();
}

// Work items whose fields no call wrote: their lets are undefined, so the compiled bodies run
// their checked records (every form checks the definedness of what it names).
void UnwriteSomeWorkFields(sim::Trace* t) {
  for (sim::PlanSnapshot& p : t->plans) {
    ref::Int32Buffer& w = p.plan.work_info;
    if (p.dialect || w.cells.empty()) continue;
    for (size_t i = 0; i < w.cells.size(); i += 13) w.cells[i] = ref::Cell::kUnwritten;
  }
}

// Decodes that see an eighth of their kv_indices rows: the KV-block loop's bound
// (`index_rows / 16 + 1`) falls below some work items' block counts, so the hang check fires,
// with the block count of the first such work item in its finding.
void ShrinkIndexRows(sim::Trace* t) {
  for (sim::Call& c : t->calls) {
    if (c.kind != CallKind::kDecode) continue;
    for (sim::TensorArg& a : c.args)
      if (a.role == "kv_indices") a.rows = std::max<int64_t>(1, a.rows / 8);
  }
}

// The planned trace, variant 0 as planned, 1 with unwritten work fields, 2 with short index
// buffers.
sim::Trace TraceVariant(const sim::Trace& planned, int variant) {
  sim::Trace t = planned;
  if (variant == 1) UnwriteSomeWorkFields(&t);
  if (variant == 2) ShrinkIndexRows(&t);
  return t;
}

// The step executed with the compiled bodies (first) and by the interpreter (second).
std::pair<sim::ExecutionResult, sim::ExecutionResult> RunBothWays(const sim::Scenario& s,
                                                                  const sim::Trace& t) {
  sim::ExecuteOptions flat, interpreted;
  interpreted.flat = false;
  return {sim::Execute(s, t, flat), sim::Execute(s, t, interpreted)};
}

// aiter's reduce with the piece loop's let and first read as placeholders: a row a million past
// the map's value (so that a read made with a row that did not load, as 0, is a finding of its
// own), and the read with or without a `when`.
constexpr const char* kReducePieces = R"json({
  "contract": 1, "name": "u", "call": "reduce", "variant": "u", "source": "test",
  "launch": {"grid": "reduce_indptr_rows - 1"},
  "program": [
    {"loop": "t", "from": 0, "to": "grid", "attribute": "tile", "body": [
      {"let": "first", "value": "reduce_indptr[t]"},
      {"let": "splits", "value": "reduce_indptr[t + 1] - first"},
      {"if": "splits >= 2", "body": [
        {"let": "q0", "value": "reduce_final_map[t].q_start"},
        {"let": "q1", "value": "reduce_final_map[t].q_end"},
        {"loop": "i", "from": 0, "to": "splits", "body": [
          {"let": "row", "value": "reduce_partial_map[first + i] + 1000000"},
          {"read": "logits", "rows": ["row", "row + q1 - q0"]WHEN},
          {"read": "attn_lse", "rows": ["row", "row + q1 - q0"]WHEN}]},
        {"write": "o", "rows": ["q0", "q1"]}]}]}]
})json";

// Generated cases whose reduce reads partial rows from a reduce_partial_map with every third
// cell unwritten, the first included (its value, partial row 0, is then never loaded: a read
// made at a row that did not load, as 0, would show): the reduce's loop over a tile's pieces
// runs as one step (load_then_accesses) where the row loads and through its records where it
// does not (the let undefined, the reads not made, the stale read of the map reported): the
// interpreter's findings either way, for aiter's reduce and for the placeholder one (whose
// piece loop with a `when` on its reads runs through the records).
TEST(FlatBody, APieceLoopRunsWholeWhereItsRowLoads) {
  GenConfig small;
  small.swarm = true;
  small.small = true;
  small.max_batch = 64;
  for (const char* when : {"", "none", ", \"when\": \"q1 > q0\""}) {
    std::shared_ptr<const Contract> user;
    if (*when) {
      std::string text = kReducePieces;
      const std::string w = std::string(when) == "none" ? "" : when;
      for (size_t at; (at = text.find("WHEN")) != std::string::npos;) text.replace(at, 4, w);
      auto parsed = sim::ParseContract(json::parse(text), "pieces.json");
      ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
      user = std::make_shared<const Contract>(std::move(*parsed));
      ASSERT_NE(user->program.at(0).flat, nullptr);
      std::string whole;
      for (const sim::FlatRecord& rec : user->program[0].flat->records)
        whole += rec.load_then_accesses ? 'L' : '.';
      EXPECT_EQ(whole, std::string(when) == "none" ? "....L...." : ".........") << when;
    }
    int64_t stale = 0, cases = 0, far = 0;
    for (uint64_t seed = 1; seed <= 60; ++seed) {
      sim::Scenario s =
          ScenarioFromSeed(small, seed, static_cast<int>(10 + seed % 91)).value();
      if (user) s.contracts.push_back(user);
      auto planned = sim::ExpandStep(s);
      if (!planned.ok()) continue;
      for (const bool unwrite : {false, true}) {
        sim::Trace t = *planned;
        if (unwrite)
          for (sim::PlanSnapshot& p : t.plans) {
            ref::Int32Buffer& m = p.plan.reduce_partial_map;
            if (p.dialect || m.cells.empty()) continue;
            for (size_t i = 0; i < m.cells.size(); i += 3) m.cells[i] = ref::Cell::kUnwritten;
          }
        const auto [a, b] = RunBothWays(s, t);
        EXPECT_EQ(Dump(a), Dump(b)) << "seed " << seed << (unwrite ? ", unwritten cells" : "")
                                    << ", " << when;
        ++cases;
        for (const sim::Violation& v : a.violations) {
          stale += unwrite && v.kind == sim::ViolationKind::kUninitializedRead &&
                   v.buffer.find("reduce_partial_map") != std::string::npos;
          far += v.kind == sim::ViolationKind::kOutOfBounds && v.first_row >= 1000000;
        }
      }
    }
    EXPECT_GT(cases, 80) << when;
    EXPECT_GT(stale, 3) << when;
    if (*when) {
      EXPECT_GT(far, 10) << when;
    }
  }
}

// Generated cases (--small and full size, swarm on, every family of docs/fuzzing.md, and
// every third one under page_count_underflows = 1, whose bodies the interpreter runs): the
// compiled bodies find what the interpreter finds, as planned, with unwritten work fields and
// with short index buffers.
TEST(FlatBody, CompiledBodiesFindWhatTheInterpreterFinds) {
  GenConfig small;
  small.swarm = true;
  small.small = true;
  small.max_batch = 64;
  GenConfig full = small;
  full.small = false;
  full.max_batch = 512;
  full.hostile_indices = full.disagreements = full.paged = full.ragged_q = true;
  int64_t compiled = 0, cases = 0, hangs = 0;
  for (uint64_t seed = 1; seed <= 90; ++seed) {
    sim::Scenario s =
        ScenarioFromSeed(seed % 2 == 0 ? full : small, seed, static_cast<int>(10 + seed % 91))
            .value();
    if (seed % 3 == 0) {
      auto decode = sim::ContractFor(s, CallKind::kDecode, sim::DecodeVariant(s), "t");
      ASSERT_TRUE(decode.ok());
      if ((*decode)->constants.count("page_count_underflows")) {
        auto u = sim::WithConstants(*decode, {{"page_count_underflows", 1}});
        ASSERT_TRUE(u.ok());
        s.contracts.push_back(*u);
      }
    }
    auto planned = sim::ExpandStep(s);
    if (!planned.ok()) continue;  // refused by the planner: nothing to run
    for (int variant = 0; variant < 3; ++variant) {
      const auto [a, b] = RunBothWays(s, TraceVariant(*planned, variant));
      const std::string what = "seed " + std::to_string(seed) + ", variant " + std::to_string(variant);
      EXPECT_EQ(Dump(a), Dump(b)) << what;
      EXPECT_EQ(b.flat_iterations, 0) << what;
      EXPECT_EQ(a.csr_skipped, b.csr_skipped) << what;
      compiled += a.flat_iterations;
      ++cases;
      if (variant == 2)
        for (const sim::Violation& v : a.violations) hangs += v.kind == sim::ViolationKind::kUnboundedLoop;
    }
  }
  EXPECT_GT(cases, 240);
  EXPECT_GT(hangs, 5);
  EXPECT_GT(compiled, 1000);  // most work items ran compiled
}

// A workgroup loop whose compiled body is one loop (the decode's work-item loop) runs that loop
// directly, without the record dispatch, when that is all the body does. Placeholders: a `when`
// on the work-item loop (workgroup 1 skips its items), and a read after it; every read is
// far past logits, so each item and each workgroup that reads is a finding row of its own.
constexpr const char* kOneLoopBody = R"json({
  "contract": 1, "name": "u", "call": "decode", "variant": "u", "source": "test",
  "launch": {"grid": "work_indptr_rows - 1"},
  "program": [{"loop": "c", "from": 0, "to": "grid", "attribute": "workgroup", "body": [
    {"loop": "w", "from": "work_indptr[c]", "to": "work_indptr[c + 1]", "attribute": "work_item"WHEN,
     "body": [{"read": "logits", "rows": ["w + 1000000", "w + 1000001"]}]}AFTER]}]
})json";

TEST(FlatBody, AWorkgroupBodyOfOneLoopRunsItDirectlyOnlyWhenThatIsAllItDoes) {
  const std::pair<const char*, const char*> variants[] = {
      {"", ""},
      {", \"when\": \"c != 1\"", ""},
      {"", ", {\"read\": \"logits\", \"rows\": [\"c + 2000000\", \"c + 2000001\"]}"}};
  for (const auto& [when, after] : variants) {
    std::string text = kOneLoopBody;
    text.replace(text.find("WHEN"), 4, when);
    text.replace(text.find("AFTER"), 5, after);
    auto parsed = sim::ParseContract(json::parse(text), "one-loop.json");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    const auto user = std::make_shared<const Contract>(std::move(*parsed));
    ASSERT_NE(user->program.at(0).flat, nullptr) << when << after;
    for (const bool sparse : {true, false}) {
      sim::Scenario s = sim::test::WorkedExample(sparse, sparse ? "atom-2026-08" : "atom-2026-11");
      s.contracts.push_back(user);
      auto planned = sim::ExpandStep(s);
      ASSERT_TRUE(planned.ok()) << planned.status().ToString();
      for (int variant = 0; variant < 2; ++variant) {  // as planned, unwritten work fields
        const auto [a, b] = RunBothWays(s, TraceVariant(*planned, variant));
        EXPECT_EQ(Dump(a), Dump(b)) << when << after << (sparse ? ", sparse" : ", dense")
                                    << ", variant " << variant;
        // The items' reads (rows from 1000000), and the workgroups' where they follow the loop.
        int64_t items = 0, workgroups = 0;
        for (const sim::Violation& v : a.violations) {
          items += v.first_row >= 1000000 && v.first_row < 2000000;
          workgroups += v.last_row >= 2000000;
        }
        EXPECT_GT(items, 0) << when << after;
        EXPECT_EQ(workgroups > 0, *after != '\0') << when << after;
        EXPECT_GT(a.flat_iterations, 0);
      }
    }
  }
}

// A user's decode contract with a record of every kind and a value of every shape: a row of
// lets, a load minus a variable and a variable minus a load, a bilinear form, a division, a
// remainder and ceiling divisions by positive and negative constants, selects, conditions
// joined by && and ||, an if, nested loops (one over rows a division and a remainder by a power
// of two give: far past logits), rows in head rows and elements, a gather; over a
// grid two past work_indptr's entries (loads of nothing: undefined lets, checked records).
constexpr const char* kEveryShape = R"json({
  "contract": 1, "name": "u", "call": "decode", "variant": "u", "source": "test",
  "launch": {"grid": "work_indptr_rows + 2"},
  "program": [{"loop": "c", "from": 0, "to": "grid", "attribute": "workgroup", "body": [
    {"let": "b", "value": "work_indptr[c]"},
    {"let": "e", "value": "work_indptr[c + 1]"},
    {"loop": "w", "from": "b", "to": "e", "attribute": "work_item", "body": [
      {"let": "qs", "value": "work_info[w].qo_start"},
      {"let": "qe", "value": "work_info[w].qo_end"},
      {"let": "ks", "value": "work_info[w].kv_start"},
      {"let": "n", "value": "work_info[w].kv_end - ks"},
      {"let": "m", "value": "qe - work_info[w].qo_start"},
      {"let": "p", "value": "work_info[w].partial_qo_loc"},
      {"read": "q", "rows": ["qs", "qe + m * heads - 2 * n + 3"], "when": "n > 3 || qs == 0"},
      {"write": "o", "rows": ["qs / 2", "cdiv(qe, 3)"], "when": "p < 0 && n >= 1"},
      {"read": "kv_indices", "rows": ["ks % 7", "n > 0 ? ks * 1 + n : ks - 1"], "unit": "elements"},
      {"read": "kv_indices", "rows": ["ks % -5", "cdiv(n, -16)"]},
      {"loop": "i", "from": 0, "to": "cdiv(n + 40, 16)", "body": [
        {"read": "logits", "rows": ["p + i", "p + i + 1"], "when": "i < 2 && p >= 0"}]},
      {"loop": "j", "from": 0, "to": "ks % 8", "body": [
        {"read": "logits", "rows": ["j + 1000000", "j + 1000001"]}]},
      {"loop": "k", "from": 0, "to": "ks / 256", "body": [
        {"read": "logits", "rows": ["k + 2000000", "k + 2000001"]}]},
      {"if": "n >= 2 && m != 1", "body": [
        {"write": "attn_lse", "rows": ["ks * page_size", "ks * page_size + qe"], "unit": "head_rows"},
        {"let": "z", "value": "n <= 4 ? kv_last_page_lens[0] - qs : qe * n - 1"},
        {"write": "logits", "rows": ["z", "z + 1"], "when": "z != 0"}]},
      {"gather": "kv_cache", "index": "kv_indices", "positions": ["ks * page_size", "(ks + n) * page_size"], "page_size": "page_size"}
    ]}
  ]}]
})json";

TEST(FlatBody, ValuesOfEveryShapeFindWhatTheInterpreterFinds) {
  auto parsed = sim::ParseContract(json::parse(kEveryShape), "every-shape.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto user = std::make_shared<const Contract>(std::move(*parsed));
  ASSERT_NE(user->program.at(0).flat, nullptr);  // the whole workgroup body compiles
  int64_t compiled = 0;
  for (const bool sparse : {true, false}) {
    sim::Scenario s = sim::test::WorkedExample(sparse, sparse ? "atom-2026-08" : "atom-2026-11");
    s.contracts.push_back(user);
    auto planned = sim::ExpandStep(s);
    ASSERT_TRUE(planned.ok()) << planned.status().ToString();
    for (int variant = 0; variant < 3; ++variant) {
      const auto [a, b] = RunBothWays(s, TraceVariant(*planned, variant));
      EXPECT_EQ(Dump(a), Dump(b)) << (sparse ? "sparse" : "dense") << ", variant " << variant;
      EXPECT_FALSE(a.violations.empty());
      compiled += a.flat_iterations;
    }
  }
  EXPECT_GT(compiled, 0);
}

// Adjacent accesses whose `when` and rows are the same (the decode's logits and attn_lse
// writes) evaluate them once (FlatRecord::same_as_prev); the same rows under another `when`, or
// the same `when` with other rows, evaluate their own. Rows far past every buffer make each
// access a finding of its own, so an access that took another's `when` or rows shows.
constexpr const char* kAdjacent = R"json({
  "contract": 1, "name": "u", "call": "decode", "variant": "u", "source": "test",
  "launch": {"grid": "work_indptr_rows - 1"},
  "program": [{"loop": "c", "from": 0, "to": "grid", "attribute": "workgroup", "body": [
    {"loop": "w", "from": "work_indptr[c]", "to": "work_indptr[c + 1]", "attribute": "work_item", "body": [
      {"let": "qs", "value": "work_info[w].qo_start"},
      {"let": "qe", "value": "work_info[w].qo_end"},
      {"let": "p", "value": "work_info[w].partial_qo_loc"},
      {"write": "o", "rows": ["qs + 1000000", "qe + 1000000"], "when": "p < 0"},
      {"write": "attn_lse", "rows": ["qs + 1000000", "qe + 1000000"], "when": "p >= 0"},
      {"write": "logits", "rows": ["qs + 1000000", "qe + 1000000"], "when": "p >= 0"},
      {"read": "q", "rows": ["qs + 1000000", "qe + 1000001"], "when": "p >= 0"},
      {"write": "attn_lse", "rows": ["p", "p + qe - qs"], "when": "p >= 0"},
      {"write": "logits", "rows": ["p", "p + qe - qs"], "when": "p >= 0"},
      {"read": "q", "rows": ["qs", "qe"]},
      {"read": "o", "rows": ["qs", "qe"]}
    ]}
  ]}]
})json";

TEST(FlatBody, AdjacentAccessesShareWhatTheyEvaluateOnlyWhenTheSame) {
  auto parsed = sim::ParseContract(json::parse(kAdjacent), "adjacent.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto user = std::make_shared<const Contract>(std::move(*parsed));
  ASSERT_NE(user->program.at(0).flat, nullptr);
  const sim::FlatBody& f = *user->program[0].flat;
  // loop w; the row of lets; eight accesses.
  ASSERT_EQ(f.records.size(), 10u);
  std::string shared;
  for (const sim::FlatRecord& r : f.records)
    shared += r.same_as_prev ? 'S' : r.feeds_next ? 'F' : '.';
  EXPECT_EQ(shared, "...FS.FSFS");
  int64_t findings = 0;
  for (const bool sparse : {true, false}) {
    sim::Scenario s = sim::test::WorkedExample(sparse, sparse ? "atom-2026-08" : "atom-2026-11");
    s.contracts.push_back(user);
    auto planned = sim::ExpandStep(s);
    ASSERT_TRUE(planned.ok()) << planned.status().ToString();
    for (int variant = 0; variant < 2; ++variant) {
      const auto [a, b] = RunBothWays(s, TraceVariant(*planned, variant));
      EXPECT_EQ(Dump(a), Dump(b)) << (sparse ? "sparse" : "dense") << ", variant " << variant;
      EXPECT_GT(a.flat_iterations, 0);
      findings += static_cast<int64_t>(a.violations.size());
    }
  }
  EXPECT_GT(findings, 8);
}

// The decode work item's shape (sim::FlatDecodeItemShape) with the let of batch_idx, the
// gather and the KV-block loop as placeholders; partial_qo_loc is the row's last let (a field
// left stale sends o, logits and attn_lse rows elsewhere, and the reduce reads what was not
// written). The gather's positions are batch_idx millions
// (rows far past kv_indices for any batch_idx but 0: a finding whose rows name the value).
constexpr const char* kDecodeItem = R"json({
  "contract": 1, "name": "u", "call": "decode", "variant": "u", "source": "test",
  "launch": {"grid": "work_indptr_rows - 1"},
  "program": [{"loop": "c", "from": 0, "to": "grid", "attribute": "workgroup", "body": [
    {"loop": "w", "from": "work_indptr[c]", "to": "work_indptr[c + 1]", "attribute": "work_item", "body": [
      {"let": "qo_start", "value": "work_info[w].qo_start"},
      {"let": "qo_end", "value": "work_info[w].qo_end"},
      {"let": "kv_start", "value": "work_info[w].kv_start"},
      {"let": "kv_end", "value": "work_info[w].kv_end"},
      {"let": "kv_offset", "value": "work_info[w].kv_offset"},
      {"let": "partial_qo_loc", "value": "work_info[w].partial_qo_loc"},
      {"let": "kv_len", "value": "kv_end - kv_start"},
      {"read": "q", "rows": ["qo_start", "qo_end"], "when": "kv_len > 0"},
      {"write": "o", "rows": ["qo_start", "qo_end"], "when": "partial_qo_loc < 0"},
      {"write": "logits", "rows": ["partial_qo_loc", "partial_qo_loc + qo_end - qo_start"], "when": "partial_qo_loc >= 0"},
      {"write": "attn_lse", "rows": ["partial_qo_loc", "partial_qo_loc + qo_end - qo_start"], "when": "partial_qo_loc >= 0"},
      {"let": "batch_idx", "value": "BATCH"},
      {"gather": "kv_cache", "index": "kv_indices", "positions": ["batch_idx * 1000000", "batch_idx * 1000000 + kv_len"], "page_size": "1"GATHER_WHEN},
      {"loop": "kv_block", "from": 0, "to": "cdiv(kv_len, 16)", "body": [], "bound": "index_rows / 16 + 1",
       "bound_what": "KV blocks", "exceeded": "too many", "hang_buffer": "kv_indices", "hang_row": "kv_start"LOOP_WHEN}
    ]}
  ]}]
})json";

std::string DecodeItemContract(const std::string& batch, const std::string& gather_when = "",
                               const std::string& loop_when = "") {
  std::string text = kDecodeItem;
  auto put = [&](const std::string& key, const std::string& with) {
    text.replace(text.find(key), key.size(), with);
  };
  put("BATCH", batch);
  put("GATHER_WHEN", gather_when.empty() ? "" : ", \"when\": \"" + gather_when + "\"");
  put("LOOP_WHEN", loop_when.empty() ? "" : ", \"when\": \"" + loop_when + "\"");
  return text;
}

// A work item of the shape runs whole (decode_item), with batch_idx as a load of the work row
// plus or minus a constant; any other batch_idx (another row, another buffer), a `when` on the
// gather or on the KV-block loop, leaves it to the records. Either way the findings are the
// interpreter's, as planned, with unwritten work fields (the whole item declines: the records
// run checked) and with an index buffer of one row (the KV-block hang check fires).
TEST(FlatBody, ADecodeItemRunsWholeOnlyInItsShape) {
  struct Case {
    std::string batch, gather_when, loop_when;
    bool whole;
  };
  const Case cases[] = {
      {"work_info[w].batch_idx", "", "", true},
      {"work_info[w].batch_idx + 2", "", "", true},
      {"3 - work_info[w].batch_idx", "", "", true},
      {"work_info[w + 1].batch_idx", "", "", false},
      {"work_info[c].batch_idx", "", "", false},
      {"kv_last_page_lens[w]", "", "", false},
      {"work_info[w].batch_idx", "kv_len > 0", "", false},
      {"work_info[w].batch_idx", "", "kv_len > 0", false},
  };
  int64_t findings = 0, hangs = 0;
  for (const Case& k : cases) {
    const std::string what = k.batch + " / " + k.gather_when + " / " + k.loop_when;
    auto parsed = sim::ParseContract(
        json::parse(DecodeItemContract(k.batch, k.gather_when, k.loop_when)), "item.json");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    const auto user = std::make_shared<const Contract>(std::move(*parsed));
    ASSERT_NE(user->program.at(0).flat, nullptr) << what;
    const sim::FlatBody& f = *user->program[0].flat;
    EXPECT_EQ(f.records.at(0).decode_item, k.whole) << what;
    for (const bool sparse : {true, false}) {
      sim::Scenario s = sim::test::WorkedExample(sparse, sparse ? "atom-2026-08" : "atom-2026-11");
      s.contracts.push_back(user);
      auto planned = sim::ExpandStep(s);
      ASSERT_TRUE(planned.ok()) << planned.status().ToString();
      for (int variant = 0; variant < 4; ++variant) {
        // 3: decodes that see one kv_indices row: the KV-block bound is 1 block.
        sim::Trace t = TraceVariant(*planned, variant == 3 ? 0 : variant);
        if (variant == 3)
          for (sim::Call& c : t.calls)
            for (sim::TensorArg& x : c.args)
              if (c.kind == CallKind::kDecode && x.role == "kv_indices") x.rows = 1;
        const auto [a, b] = RunBothWays(s, t);
        EXPECT_EQ(Dump(a), Dump(b)) << what << (sparse ? ", sparse" : ", dense") << ", variant "
                                    << variant;
        EXPECT_GT(a.flat_iterations, 0);
        findings += static_cast<int64_t>(a.violations.size());
        for (const sim::Violation& v : a.violations)
          hangs += v.kind == sim::ViolationKind::kUnboundedLoop;
      }
    }
  }
  EXPECT_GT(findings, 40);
  EXPECT_GT(hangs, 8);
}

// A comparison of a variable with a constant runs as data (FlatCmp::outcomes): every operator,
// the variable on either side and with an offset, each the `when` of one write of logits rows
// i + 1000000 (past the buffer: one finding whose first and last rows are the least and the
// greatest i for which the condition held) in a loop of i over 0 .. 4, the compiled form against
// the interpreter.
constexpr const char* kCompare = R"json({
  "contract": 1, "name": "u", "call": "decode", "variant": "u", "source": "test",
  "launch": {"grid": "work_indptr_rows - 1"},
  "program": [{"loop": "c", "from": 0, "to": "grid", "attribute": "workgroup", "body": [
    {"loop": "w", "from": "work_indptr[c]", "to": "work_indptr[c + 1]", "attribute": "work_item", "body": [
      {"let": "qs", "value": "work_info[w].qo_start"},
      {"loop": "i", "from": 0, "to": 5, "body": [
        {"write": "logits", "rows": ["i + 1000000", "i + 1000001"], "when": "WHEN"}]}
    ]}
  ]}]
})json";

TEST(FlatBody, AVariableAgainstAConstantComparesAsTheInterpreter) {
  const char* whens[] = {"i < 2",  "2 < i",  "i <= 2", "2 <= i", "i > 2",     "2 > i",
                         "i >= 2", "2 >= i", "i == 2", "2 == i", "i != 2",    "2 != i",
                         "i + 3 < 5", "7 - 3 > i + 1", "!i", "i"};
  for (const char* when : whens) {
    std::string text = kCompare;
    text.replace(text.find("WHEN"), 4, when);
    auto parsed = sim::ParseContract(json::parse(text), "compare.json");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    const auto user = std::make_shared<const Contract>(std::move(*parsed));
    ASSERT_NE(user->program.at(0).flat, nullptr) << when;
    const sim::FlatBody& f = *user->program[0].flat;
    ASSERT_EQ(f.conds.size(), 1u) << when;
    EXPECT_GE(f.conds[0].a.slot, 0) << when;  // the shape the unchecked executor runs as data
    sim::Scenario s = sim::test::WorkedExample(false, "atom-2026-11");
    s.contracts.push_back(user);
    auto planned = sim::ExpandStep(s);
    ASSERT_TRUE(planned.ok()) << planned.status().ToString();
    const auto [a, b] = RunBothWays(s, TraceVariant(*planned, 0));
    EXPECT_EQ(Dump(a), Dump(b)) << when;
    EXPECT_GT(a.flat_iterations, 0) << when;
    bool found = false;
    for (const sim::Violation& v : a.violations)
      found |= v.kind == sim::ViolationKind::kOutOfBounds;
    EXPECT_TRUE(found) << when;
  }
}


// A decode item copies its row of lets from fixed arrays (sim::FlatItemRow) in any order: up to
// 8 lets whose slots differ; more, or a slot named twice, copy LetRow::slot_field in order.
TEST(FlatBody, AnItemRowIsFixedOnlyForEightLetsOfDistinctSlots) {
  sim::LetRow row;
  row.slot_field = {{21, 5}, {22, 1}, {23, 2}};
  const sim::FlatItemRow three = sim::MakeFlatItemRow(row);
  ASSERT_EQ(three.n, 3);
  EXPECT_EQ(std::vector<int32_t>(three.slot, three.slot + 3), (std::vector<int32_t>{21, 22, 23}));
  EXPECT_EQ(std::vector<int32_t>(three.field, three.field + 3), (std::vector<int32_t>{5, 1, 2}));
  row.slot_field.push_back({22, 3});  // slot 22 again: the later let wins, in order
  EXPECT_EQ(sim::MakeFlatItemRow(row).n, 0);
  row.slot_field = {};
  for (int32_t k = 0; k < 8; ++k) row.slot_field.push_back({30 + k, k});
  EXPECT_EQ(sim::MakeFlatItemRow(row).n, 8);
  row.slot_field.push_back({40, 0});
  EXPECT_EQ(sim::MakeFlatItemRow(row).n, 0);
}


// The loop trip limit (ref/limits.h `loop_trips`) is read when an execution starts: set low
// before a step runs, the workgroup loop's grid is past it and the loop is reported as a hang,
// compiled and interpreted alike; back to the default, the same step has no hang.
TEST(FlatBody, TheLoopTripLimitIsTheOneSetBeforeTheStepRuns) {
  sim::Scenario s = sim::test::WorkedExample(false, "atom-2026-11");
  auto planned = sim::ExpandStep(s);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  const auto hangs = [](const sim::ExecutionResult& r) {
    int64_t n = 0;
    for (const sim::Violation& v : r.violations) n += v.kind == sim::ViolationKind::kUnboundedLoop;
    return n;
  };
  ASSERT_TRUE(ref::SetLimits("loop_trips=1").ok());
  const auto [a, b] = RunBothWays(s, *planned);
  ref::ResetLimits();
  EXPECT_GT(hangs(a), 0);
  EXPECT_EQ(Dump(a), Dump(b));
  const auto [c, d] = RunBothWays(s, *planned);
  EXPECT_EQ(hangs(c), 0);
  EXPECT_EQ(Dump(c), Dump(d));
}

// Nested loops, each within loop_trips, multiply (2^26 x 2^26 would run for days): a call's loops
// in all are held to call_trips, each loop's count charged as it starts (and held to it for
// every kernel call: the step's other calls take far fewer). A decode whose one workgroup runs
// 3 x 100000 reads of q (300003 trips): at call_trips 300003 it runs whole, at 300002 the third
// inner loop is the hang (200003 charged, 99999 left: it needs 100000), reported once per step
// with its numbers; compiled and interpreted alike.
TEST(FlatBody, NestedLoopsStopAtTheCallsTripsInAll) {
  auto parsed = sim::ParseContract(json::parse(R"json({
    "contract": 1, "name": "nested", "call": "decode", "variant": "nested", "source": "test",
    "launch": {"grid": "1"},
    "program": [{"loop": "i", "from": 0, "to": 3, "body": [
      {"loop": "j", "from": 0, "to": 100000, "body": [
        {"read": "q", "rows": ["0", "1"], "when": "i + j >= 0"}]}]}]})json"),
                                   "nested.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  sim::Scenario s = sim::test::WorkedExample(false, "atom-2026-11");
  s.contracts.push_back(std::make_shared<const Contract>(std::move(*parsed)));
  auto planned = sim::ExpandStep(s);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  const auto hangs = [](const sim::ExecutionResult& r) {
    std::vector<std::string> out;
    for (const sim::Violation& v : r.violations)
      if (v.kind == sim::ViolationKind::kUnboundedLoop) out.push_back(v.detail);
    return out;
  };
  ASSERT_TRUE(ref::SetLimits("call_trips=300003").ok());
  const auto [a, b] = RunBothWays(s, *planned);
  ASSERT_TRUE(ref::SetLimits("call_trips=300002").ok());
  const auto [c, d] = RunBothWays(s, *planned);
  ref::ResetLimits();
  EXPECT_EQ(hangs(a), std::vector<std::string>{});
  EXPECT_EQ(Dump(a), Dump(b));
  EXPECT_EQ(hangs(c), std::vector<std::string>{
                          "work -1 would walk 100000 iterations (bound 99999): with the "
                          "iterations before it, the call's loops would pass call_trips (300002: "
                          "nested loops multiply); reported as a hang"})
      << Dump(c);
  EXPECT_EQ(Dump(c), Dump(d));
}

}  // namespace
}  // namespace mlasim::fuzz
