// Kernel contracts as data (sim/contract.h) and their expressions (sim/expr.h): the language's
// values and errors, every error return of the contract parser, the built-in contracts, and the
// call tables (sim/call_table.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fuzz/findings.h"
#include "ref/limits.h"
#include "sim/call_table.h"
#include "sim/contract.h"
#include "sim/json_input.h"

namespace mlasim::sim {
namespace {

using nlohmann::json;

// A scope with variables a (slot 0), b (slot 1), a constant k = 7 and a loadable buffer
// buf[3 elements] with rows of 2 fields (x, y).
struct Fixture {
  ExprScope scope;
  int64_t vars[2] = {10, 3};
  uint8_t defined[2] = {1, 1};
  std::vector<int32_t> data = {5, 6, 7, 8, 9, 10};
  std::vector<int64_t> loads;  // elements loaded, in order
  Fixture() {
    scope.Var("a", 0);
    scope.Var("b", 1);
    scope.Const("k", 7);
    scope.Buffer({"buf", 2, {"x", "y"}}, 0);
  }
  static LoadResult Load(void* self, int32_t, int64_t e) {
    auto* f = static_cast<Fixture*>(self);
    f->loads.push_back(e);
    if (e < 0 || e >= static_cast<int64_t>(f->data.size())) return {};
    return {f->data[e], true};
  }
  // The value of `text`, or INT64_MIN when it is undefined; ASSERTs that it compiles.
  int64_t Value(const std::string& text) {
    auto e = Expr::Compile(text, scope, "t");
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok()) return INT64_MIN;
    bool def = true;
    const int64_t v = e->Eval(vars, defined, Loader{&Fixture::Load, this}, &def);
    return def ? v : INT64_MIN;
  }
  std::string Error(const std::string& text) {
    auto e = Expr::Compile(text, scope, "$.x");
    return e.ok() ? "" : e.status().ToString();
  }
};

// A call kind's role names are distinct and fit the executor's role arrays: the executor binds a
// call's tensor to the one role of its name (CallExecutor::BindRole stops at the first match).
TEST(CallRoles, EveryKindNamesDistinctRolesWithinTheRoleArrays) {
  for (CallKind k : {CallKind::kPlanBuild, CallKind::kPlanUpdate, CallKind::kIndexFill,
                     CallKind::kDecode, CallKind::kReduce}) {
    const std::vector<std::string>& names = CallRoles(k);
    EXPECT_LE(names.size(), static_cast<size_t>(kMaxRoles)) << CallKindName(k);
    for (size_t i = 0; i < names.size(); ++i)
      for (size_t j = 0; j < i; ++j) EXPECT_NE(names[i], names[j]) << CallKindName(k);
  }
  EXPECT_EQ(CallRoles(CallKind::kDecode).size(), 9u);
  EXPECT_EQ(CallRoles(CallKind::kReduce).size(), 7u);
}

TEST(Expr, ArithmeticFollowsCPrecedenceAndWrapsLike64BitIntegers) {
  Fixture f;
  EXPECT_EQ(f.Value("a + b * 2"), 16);
  EXPECT_EQ(f.Value("(a + b) * 2"), 26);
  EXPECT_EQ(f.Value("a - b - 1"), 6);
  EXPECT_EQ(f.Value("a / b"), 3);
  EXPECT_EQ(f.Value("-a / b"), -3);  // truncation toward zero, as C
  EXPECT_EQ(f.Value("a % b"), 1);
  EXPECT_EQ(f.Value("cdiv(a, b)"), 4);
  EXPECT_EQ(f.Value("cdiv(9, 3)"), 3);
  EXPECT_EQ(f.Value("cdiv(0, 16)"), 0);
  EXPECT_EQ(f.Value("min(a, b, k)"), 3);
  EXPECT_EQ(f.Value("max(a, b, k)"), 10);
  EXPECT_EQ(f.Value("u32(0 - 1)"), 4294967295);
  EXPECT_EQ(f.Value("i32(2147483648)"), -2147483648LL);
  EXPECT_EQ(f.Value("9223372036854775807 + 1"), INT64_MIN + 0);  // wraps (then marked defined)
  EXPECT_EQ(f.Value("u32(b - 4) / 16 + 1"), 268435456);          // the J what-if: (0 - 1) / 16 + 1
}

TEST(Expr, ComparisonsLogicAndSelect) {
  Fixture f;
  EXPECT_EQ(f.Value("a > b && b >= 3"), 1);
  EXPECT_EQ(f.Value("a < b || b != 3"), 0);
  EXPECT_EQ(f.Value("!a"), 0);
  EXPECT_EQ(f.Value("!(a == 10)"), 0);
  EXPECT_EQ(f.Value("a <= 10 ? k : b"), 7);
  EXPECT_EQ(f.Value("a > 10 ? k : b"), 3);
  EXPECT_EQ(f.Value("a && b"), 1);  // logic yields 0/1
}

TEST(Expr, LoadsOfElementsAndFields) {
  Fixture f;
  EXPECT_EQ(f.Value("buf[2]"), 7);
  EXPECT_EQ(f.Value("buf[1].x"), 7);
  EXPECT_EQ(f.Value("buf[1].y"), 8);
  EXPECT_EQ(f.Value("buf[b - 1].y + 1"), 11);
  EXPECT_EQ(f.loads, (std::vector<int64_t>{2, 2, 3, 5}));
}

TEST(Expr, AnUndefinedLoadOrVariableOrDivisionMakesTheValueUndefined) {
  Fixture f;
  EXPECT_EQ(f.Value("buf[3].x + 1"), INT64_MIN);  // element 6: past the buffer
  EXPECT_EQ(f.Value("buf[0 - 1]"), INT64_MIN);
  EXPECT_EQ(f.Value("a / (b - 3)"), INT64_MIN);
  EXPECT_EQ(f.Value("a % 0"), INT64_MIN);
  EXPECT_EQ(f.Value("cdiv(a, 0)"), INT64_MIN);
  f.defined[1] = 0;
  EXPECT_EQ(f.Value("a + b"), INT64_MIN);
  EXPECT_EQ(f.Value("b"), INT64_MIN);
  EXPECT_EQ(f.Value("a"), 10);
}

TEST(Expr, ShortCircuitSkipsTheLoadsOfTheSideNotTaken) {
  Fixture f;
  EXPECT_EQ(f.Value("a > 100 && buf[0] > 0"), 0);
  EXPECT_EQ(f.Value("a > 0 || buf[0] > 0"), 1);
  EXPECT_EQ(f.Value("a > 0 ? 1 : buf[0]"), 1);
  EXPECT_TRUE(f.loads.empty());
  EXPECT_EQ(f.Value("a > 0 ? buf[0] : 1"), 5);
  EXPECT_EQ(f.loads, (std::vector<int64_t>{0}));
}

TEST(Expr, ConstantsFoldButNeverDropALoad) {
  Fixture f;
  auto c = Expr::Compile("a > 0 || 1", f.scope, "t");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->is_constant());
  EXPECT_EQ(c->constant_value(), 1);
  auto z = Expr::Compile("a > 0 && 0", f.scope, "t");
  ASSERT_TRUE(z.ok());
  EXPECT_TRUE(z->is_constant());
  EXPECT_EQ(z->constant_value(), 0);
  auto k = Expr::Compile("k * 2 + 1", f.scope, "t");
  ASSERT_TRUE(k.ok());
  EXPECT_TRUE(k->is_constant());
  EXPECT_EQ(k->constant_value(), 15);
  auto l = Expr::Compile("buf[0] > 0 || 1", f.scope, "t");  // the load must still happen
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(l->is_constant());
  EXPECT_EQ(f.Value("buf[0] > 0 || 1"), 1);
  EXPECT_EQ(f.loads, (std::vector<int64_t>{0}));
  auto d = Expr::Compile("1 / 0", f.scope, "t");  // stays a run-time undefined value
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->is_constant());
}

// The interpreter's fast shapes (Expr::Shape: a term, two terms joined by an operator, && or ||,
// a select, a load alone or with one operator) against the stack machine: `-(-(e))` has the same
// value as `e` but no fast shape, so the stack machine evaluates it. Same value, same
// definedness and the same loads, in order, for every variable defined or not and for divisors
// of 0 and -1.
TEST(Expr, FastShapesAgreeWithTheStackMachine) {
  // clang-format off
  const std::vector<std::string> exprs = {
      "a", "7", "a + b", "a / b", "a % b", "cdiv(a, b)", "!b", "a / (b - 3)", "a - b - 1",
      "a + b * 2", "min(a, b, k)", "a && b", "a || b", "a > b && b >= 3", "a < b || b != 3",
      "b == 0 && a / b > 1", "b != 0 || a / b > 1", "a > 10 ? k : b", "b <= 0 ? a + 1 : a / b",
      "buf[b]", "buf[b - 1].y", "buf[a].x", "buf[b - 1].y + 1", "1 + buf[b].x", "buf[b] - a",
      "a - buf[0 - 1]", "buf[a / b]", "buf[b].y / b", "a / b + buf[1]",
      // trees (Shape::kTree): operators, && || ?: over operands with shapes of their own
      "a != 0 || b == 1 ? a * b : (a - 1) * b + buf[b].x", "(a + b) * (a - b)",
      "buf[a] + buf[b - 1]", "buf[b] - buf[a] / b", "(b == 0 || buf[b] > 5) && a / b > 1",
      "buf[b] ? a / b : buf[a]", "b ? buf[b].y : buf[0 - b]", "a > b + 1 || buf[b] < a - 1",
      "min(a - b, buf[b], k * 2)", "(a / b) / (b - 1) + b"};
  // clang-format on
  for (const int64_t b : {int64_t{3}, int64_t{0}, int64_t{-1}, int64_t{2}}) {
    for (int undefined = 0; undefined < 3; ++undefined) {  // none, a, b
      for (const std::string& e : exprs) {
        Fixture fast, slow;
        for (Fixture* f : {&fast, &slow}) {
          f->vars[1] = b;
          if (undefined > 0) f->defined[undefined - 1] = 0;
        }
        const std::string at =
            e + " with b = " + std::to_string(b) + ", undefined " + std::to_string(undefined);
        EXPECT_EQ(fast.Value(e), slow.Value("-(-(" + e + "))")) << at;
        EXPECT_EQ(fast.loads, slow.loads) << at;
      }
    }
  }
}

// What the interpreter runs for the expressions of the built-in decode contract: the gather's
// end position is a tree of fast shapes, not the stack machine; `-(-(e))` stays with the stack
// machine (the test above compares against it).
TEST(Expr, TheGatherEndPositionIsATree) {
  auto c = BuiltinContract(CallKind::kDecode, "asm", "t");
  ASSERT_TRUE(c.ok());
  const Statement* gather = nullptr;
  for (const Statement& st : (*c)->program.at(0).body.at(0).body)
    if (st.kind == Statement::Kind::kGather) gather = &st;
  ASSERT_NE(gather, nullptr);
  EXPECT_EQ(gather->end.shape(), Expr::Shape::kTree) << gather->end.text();
  EXPECT_EQ(gather->begin.shape(), Expr::Shape::kTerm);
  Fixture f;
  auto neg = Expr::Compile("-(-(a + b * 2))", f.scope, "t");
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ(neg->shape(), Expr::Shape::kGeneric);
  auto pair = Expr::Compile("(a + b) * (a - b)", f.scope, "t");  // two terms: a pair
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->shape(), Expr::Shape::kPair);
  auto tree = Expr::Compile("(a + b) * (a - b) + buf[b]", f.scope, "t");
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(tree->shape(), Expr::Shape::kTree);
  EXPECT_EQ(f.Value("(a + b) * (a - b) + buf[b]"), 13 * 7 + 8);
  EXPECT_EQ(f.loads, (std::vector<int64_t>{3}));
}

TEST(Expr, EveryCompileErrorNamesTheFieldAndTheReason) {
  Fixture f;
  EXPECT_EQ(f.Error("a +"), "$.x: expected a value at character 3 of \"a +\"");
  EXPECT_EQ(f.Error("a b"), "$.x: unexpected 'b' at character 2 of \"a b\"");
  EXPECT_EQ(f.Error("(a"), "$.x: expected ')' at character 2 of \"(a\"");
  EXPECT_EQ(f.Error("a ? b"), "$.x: expected ':' at character 5 of \"a ? b\"");
  EXPECT_EQ(f.Error("zz + 1"),
            "$.x: unknown name 'zz' (known: a, b, buf, k, and the functions min, max, cdiv, u32, "
            "i32) at character 0 of \"zz + 1\"");
  EXPECT_EQ(f.Error("sqrt(a)"),
            "$.x: unknown function 'sqrt' (known: min, max, cdiv, u32, i32) at character 0 of "
            "\"sqrt(a)\"");
  EXPECT_EQ(f.Error("min(a)"),
            "$.x: min() takes at least 2 arguments at character 0 of \"min(a)\"");
  EXPECT_EQ(f.Error("cdiv(a)"), "$.x: cdiv() takes 2 arguments at character 0 of \"cdiv(a)\"");
  EXPECT_EQ(f.Error("u32(a, b)"), "$.x: u32() takes 1 argument at character 0 of \"u32(a, b)\"");
  EXPECT_EQ(f.Error("buf + 1"),
            "$.x: buffer 'buf' needs an index: buf[...] at character 0 of \"buf + 1\"");
  EXPECT_EQ(f.Error("buf[0].z"),
            "$.x: 'buf' rows have no field 'z' (fields: x, y) at character 7 of \"buf[0].z\"");
  EXPECT_EQ(f.Error("buf[0"), "$.x: expected ']' at character 5 of \"buf[0\"");
  EXPECT_EQ(f.Error("99999999999999999999"),
            "$.x: integer does not fit 64 bits at character 0 of \"99999999999999999999\"");
  EXPECT_EQ(f.Error(""), "$.x: expected a value at character 0 of \"\"");
  std::string deep(65, '(');
  deep += "a" + std::string(65, ')');
  EXPECT_NE(f.Error(deep).find("nested deeper than 64 levels"), std::string::npos);
  EXPECT_EQ(f.Error(std::string(4097, '1')), "$.x: expression longer than 4096 bytes");
  // 64 levels exactly is fine (the outermost expression is level 1).
  std::string ok(63, '(');
  ok += "a" + std::string(63, ')');
  EXPECT_EQ(f.Error(ok), "");
  EXPECT_NE(f.Error(std::string(64, '-') + "a").find("nested deeper"), std::string::npos);
  ok = std::string(63, '-') + "a";
  EXPECT_EQ(f.Error(ok), "");
}

// ---------------------------------------------------------------------------------------------
// Contracts
// ---------------------------------------------------------------------------------------------

json Minimal() {
  return json::parse(R"({
    "contract": 1, "name": "t", "call": "decode", "variant": "t", "source": "test",
    "launch": {"grid": "clusters"},
    "program": [{"loop": "c", "from": 0, "to": "grid", "body": [
      {"read": "q", "rows": ["c", "c + 1"]}]}]})");
}

std::string ContractError(const json& doc) {
  auto c = ParseContract(doc, "user.json");
  return c.ok() ? "" : c.status().ToString();
}

TEST(Contract, AMinimalContractParses) {
  auto c = ParseContract(Minimal(), "user.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->call, CallKind::kDecode);
  ASSERT_EQ(c->program.size(), 1u);
  EXPECT_EQ(c->program[0].kind, Statement::Kind::kLoop);
  EXPECT_EQ(c->program[0].body[0].buffer, "q");
  EXPECT_EQ(c->semantics.zero_kv, ZeroKv::kReadsQWritesOutput);  // the defaults
  EXPECT_EQ(c->semantics.invalid_index, InvalidIndex::kFault);
}

TEST(Contract, EveryErrorNamesTheFileTheJsonPathAndTheReason) {
  struct Case {
    const char* patch;  // JSON merge patch over Minimal(), or a whole document with "!"
    const char* want;
  };
  const Case cases[] = {
      {"!3", "user.json: $: must be an object"},
      {R"({"contract": 2})", "user.json: $.contract: must be in 1..1 (got 2)"},
      {R"({"name": 5})", "user.json: $.name: must be a string"},
      {R"({"call": "prefill"})",
       "user.json: $.call: must be one of plan_build, plan_update, index_fill, decode, reduce "
       "(got \"prefill\")"},
      {R"({"extra": 1})", "user.json: $.extra: unknown key"},
      {R"({"launch": {"grid": "clusterz"}})", "user.json: $.launch.grid: unknown name 'clusterz'"},
      {R"({"launch": {"grid": null}})", "user.json: $.launch.grid: required key is missing"},
      {R"({"semantics": {"zero_kv": "maybe"}})",
       "user.json: $.semantics.zero_kv: must be one of reads_q_writes_output, reads_q_only, "
       "skips (got \"maybe\")"},
      {R"({"semantics": {"invalid_index": "ignore"}})",
       "user.json: $.semantics.invalid_index: must be one of fault, clamp_to_zero, wrap, "
       "masked, minus_one_masked (got \"ignore\")"},
      {R"({"semantics": {"empty_rows": "zero_and_inf_lse"}})",
       "user.json: $.semantics.empty_rows: must be one of zero_and_neg_inf_lse, nan, unwritten, "
       "zero_and_pos_inf_lse (got \"zero_and_inf_lse\")"},
      {R"({"semantics": {"sources": {"colour": "x"}}})",
       "user.json: $.semantics.sources.colour: unknown semantics field"},
      {R"({"constants": {"tile": "64"}})", "user.json: $.constants.tile: must be an integer"},
      // A constant named like another name of the program was accepted: it replaced a launch
      // variable or a semantics switch in the program alone, a buffer hid it, a non-name could
      // not be used.
      {R"({"constants": {"grid": 5}})",
       "user.json: $.constants.grid: is a launch variable; a constant needs a name of its own"},
      {R"({"constants": {"zero_kv_reads_q": 0}})",
       "user.json: $.constants.zero_kv_reads_q: is a switch that semantics sets"},
      {R"({"constants": {"work_info": 1}})",
       "user.json: $.constants.work_info: is a buffer a decode contract loads from"},
      {R"({"constants": {"": 1}})", "user.json: $.constants.: must be a name (letters, digits, _)"},
      {R"({"constants": {"tile rows": 1}})",
       "user.json: $.constants.tile rows: must be a name (letters, digits, _)"},
      {R"({"program": {}})", "user.json: $.program: must be an array of statements"},
      {R"({"program": [{"read": "q"}]})", "user.json: $.program[0].rows: required key"},
      {R"({"program": [{"read": "q", "write": "o", "rows": [0, 1]}]})",
       "user.json: $.program[0]: needs exactly one of read, write, gather, loop, let, if"},
      {R"({"program": [{"read": "kv_cachez", "rows": [0, 1]}]})",
       "user.json: $.program[0].read: a decode call passes no buffer \"kv_cachez\""},
      {R"({"program": [{"read": "q", "rows": [0]}]})",
       "user.json: $.program[0].rows: must be [begin, end): two expressions"},
      {R"({"program": [{"read": "q", "rows": [0, 1], "unit": "pages"}]})",
       "user.json: $.program[0].unit: must be one of rows, head_rows, elements, bytes"},
      {R"({"program": [{"read": "q", "rows": [0, 1], "colour": 1}]})",
       "user.json: $.program[0].colour: unknown key"},
      {R"({"program": [{"loop": "c", "to": 1, "body": []}]})",
       "user.json: $.program[0]: a loop needs \"from\" and \"to\""},
      {R"({"program": [{"loop": "1c", "from": 0, "to": 1, "body": []}]})",
       "user.json: $.program[0].loop: must be a name (letters, digits, _)"},
      {R"({"program": [{"loop": "c", "from": 0, "to": 1, "attribute": "tiles", "body": []}]})",
       "user.json: $.program[0].attribute: must be one of none, workgroup, work_item, tile"},
      {R"({"program": [{"loop": "c", "from": 0, "to": 1, "bound": 5, "body": []}]})",
       "user.json: $.program[0].bound_what: required key is missing"},
      {R"({"program": [{"loop": "c", "from": 0, "to": 1}]})",
       "user.json: $.program[0].body: required key is missing"},
      {R"({"program": [{"let": "x"}]})", "user.json: $.program[0].value: required key is missing"},
      {R"({"program": [{"if": "1"}]})", "user.json: $.program[0].body: required key is missing"},
      {R"({"program": [{"gather": "kv_cache", "positions": [0, 1]}]})",
       "user.json: $.program[0].index: required key is missing"},
      {R"({"program": [{"read": "q", "rows": ["w", 1]}]})",
       "user.json: $.program[0].rows[0]: unknown name 'w'"},
      {R"({"program": [{"read": "q", "rows": [true, 1]}]})",
       "user.json: $.program[0].rows[0]: must be an expression (a string) or an integer"},
      {R"({"extends": "nope"})", "user.json: $.extends: no built-in contract named \"nope\""},
      {R"({"extends": 4})", "user.json: $.extends: must be a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.patch);
    json doc;
    if (c.patch[0] == '!') {
      doc = json::parse(c.patch + 1);
    } else {
      doc = Minimal();
      doc.merge_patch(json::parse(c.patch));
    }
    const std::string err = ContractError(doc);
    EXPECT_EQ(err.rfind(c.want, 0), 0u) << "got: " << err;
  }
}

TEST(Contract, LoopsNestEightDeepNotNine) {
  auto nest = [](int depth) {
    json body = json::array({json{{"read", "q"}, {"rows", {0, 1}}}});
    for (int i = depth - 1; i >= 0; --i)
      body = json::array(
          {json{{"loop", "v" + std::to_string(i)}, {"from", 0}, {"to", 1}, {"body", body}}});
    json doc = Minimal();
    doc["program"] = body;
    return doc;
  };
  EXPECT_EQ(ContractError(nest(8)), "");
  EXPECT_EQ(ContractError(nest(9)).rfind("user.json: $.program[0].body[0].body[0].body[0].body[0]"
                                         ".body[0].body[0].body[0].body[0]: loops nested deeper "
                                         "than 8",
                                         0),
            0u)
      << ContractError(nest(9));
}

// The statements of the whole program, nested ones included, against contract_statements
// (ref/limits.h): the limit parses, one more is refused naming the statement past it. A 32 MiB
// contract of 900,000 nested reads took 3.8 GB before (scripts/memory-bound.sh).
TEST(Contract, StatementsAtTheLimitCompileOnePastItIsRefused) {
  auto program = [](int reads) {  // a loop holding `reads` reads: reads + 1 statements
    json body = json::array();
    for (int i = 0; i < reads; ++i) body.push_back(json{{"read", "q"}, {"rows", {"c", "c + 1"}}});
    json doc = Minimal();
    doc["program"] =
        json::array({json{{"loop", "c"}, {"from", 0}, {"to", "grid"}, {"body", body}}});
    return doc;
  };
  EXPECT_EQ(ref::Limit(ref::LimitId::kContractStatements), 4096);
  ASSERT_TRUE(ref::SetLimits("contract_statements=100").ok());
  EXPECT_EQ(ContractError(program(99)), "");  // 100 statements
  EXPECT_EQ(ContractError(program(100)),
            "user.json: $.program[0].body[99]: statements in the contract's "
            "program is 101, above mlasim's limit of 100 (raise it with --limit "
            "contract_statements=N or MLASIM_LIMITS=contract_statements=N, up to 1048576)");
  ref::ResetLimits();
  EXPECT_EQ(ContractError(program(255)), "");  // the default holds any one body
}

TEST(Contract, PlanCallsNameTheModelTheyRun) {
  json doc = {
      {"contract", 1}, {"name", "p"}, {"call", "plan_build"}, {"variant", "p"}, {"source", "t"}};
  EXPECT_EQ(ContractError(doc), "user.json: $.model: required key is missing");
  doc["model"] = "flashinfer";
  EXPECT_EQ(ContractError(doc),
            "user.json: $.model: must be get_mla_metadata_v1 or decode_update_mla_metadata_v1");
  doc["model"] = "get_mla_metadata_v1";
  EXPECT_EQ(ContractError(doc), "");
}

TEST(Contract, BuiltinsParseWithTheirSemantics) {
  EXPECT_EQ(BuiltinVariants(CallKind::kDecode),
            (std::vector<std::string>{"asm", "flashinfer_fa3", "flashmla_dense", "flashmla_sparse",
                                      "hk", "opus"}));
  EXPECT_EQ(BuiltinVariants(CallKind::kReduce),
            (std::vector<std::string>{"in_decode", "mla_reduce_v1"}));
  EXPECT_EQ(BuiltinVariants(CallKind::kIndexFill),
            (std::vector<std::string>{"indexer_gather", "kv_indices_generate"}));
  const std::pair<const char*, ZeroKv> zero[] = {
      {"asm", ZeroKv::kReadsQWritesOutput}, {"opus", ZeroKv::kSkips}, {"hk", ZeroKv::kReadsQOnly}};
  for (const auto& [v, z] : zero) {
    auto c = BuiltinContract(CallKind::kDecode, v, "t");
    ASSERT_TRUE(c.ok());
    EXPECT_EQ((*c)->semantics.zero_kv, z) << v;
    EXPECT_FALSE((*c)->semantics.sources.at("zero_kv").empty()) << v;
    EXPECT_EQ((*c)->program.size(), 1u) << v;  // opus and hk extend asm's program
  }
  auto bad = BuiltinContract(CallKind::kDecode, "flydsl", "$.kernel");
  EXPECT_EQ(bad.status().ToString(),
            "$.kernel: no built-in decode contract \"flydsl\" (known: asm, flashinfer_fa3, "
            "flashmla_dense, flashmla_sparse, hk, opus)");
}

// The work-item prologue of the asm contract (`let partial_qo_loc = work_info[w]
// .partial_qo_loc` ... `let kv_offset = work_info[w].kv_offset`) is one row load for the
// executor; `let batch_idx`, apart from it, stays a single let. The lets stay in the program.
TEST(Contract, TheWorkItemPrologueIsOneRowLoad) {
  auto c = BuiltinContract(CallKind::kDecode, "asm", "t");
  ASSERT_TRUE(c.ok());
  const std::vector<Statement>& item = (*c)->program.at(0).body.at(0).body;
  ASSERT_EQ(item.at(0).kind, Statement::Kind::kLet);
  EXPECT_EQ(item[0].var, "partial_qo_loc");
  const LetRow& row = item[0].let_row;
  EXPECT_EQ(row.buffer, kLoadWorkInfo);
  EXPECT_EQ(row.width, 8);
  EXPECT_EQ(row.index_slot, (*c)->program[0].body[0].slot);  // w
  std::vector<int32_t> fields;
  for (size_t i = 0; i < row.slot_field.size(); ++i) {
    EXPECT_EQ(row.slot_field[i].first, item[i].slot);
    fields.push_back(row.slot_field[i].second);
  }
  // work_info fields: batch_idx, partial_qo_loc, qo_start, qo_end, kv_start, kv_end, kv_offset
  EXPECT_EQ(fields, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  for (size_t i = 1; i < item.size(); ++i) EXPECT_TRUE(item[i].let_row.slot_field.empty()) << i;
  EXPECT_EQ(item[6].var, "kv_len");
}

TEST(Contract, WithConstantsIsADataVariantCachedPerValue) {
  auto asm_ = *BuiltinContract(CallKind::kDecode, "asm", "t");
  auto same = WithConstants(asm_, {{"zero_kv_reads_index_row", 0}});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->get(), asm_.get());
  auto a = WithConstants(asm_, {{"zero_kv_reads_index_row", 1}});
  auto b = WithConstants(asm_, {{"zero_kv_reads_index_row", 1}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_NE(a->get(), asm_.get());
  EXPECT_EQ((*a)->constants.at("zero_kv_reads_index_row"), 1);
  auto bad = WithConstants(asm_, {{"tile_rows", 64}});
  EXPECT_EQ(bad.status().ToString(),
            "contract: the decode contract aiter-asm-decode has no switch (constant) named "
            "tile_rows");
}

TEST(Contract, ExtendsMergesObjectsAndReplacesTheRest) {
  auto c = ParseContract(json::parse(R"({"extends": "asm", "name": "mine", "variant": "mine",
      "semantics": {"invalid_index": "clamp_to_zero"}})"),
                         "user.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->semantics.invalid_index, InvalidIndex::kClampToZero);
  EXPECT_EQ(c->semantics.zero_kv, ZeroKv::kReadsQWritesOutput);  // kept from asm
  EXPECT_EQ(c->program.size(), 1u);
  EXPECT_EQ(c->call, CallKind::kDecode);
}

// The names the error lists (the built-in files, with ".json") are names `extends` takes, as
// are the file without ".json", the contract's name and its variant.
TEST(Contract, ExtendsTakesEachSpellingOfABuiltIn) {
  for (const char* base : {"aiter-decode-opus.json", "aiter-decode-opus", "aiter-opus-decode",
                           "opus"}) {
    SCOPED_TRACE(base);
    auto c = ParseContract(json{{"extends", base}}, "user.json");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->semantics.zero_kv, ZeroKv::kSkips);
    EXPECT_EQ(c->variant, "opus");
  }
  // The error lists the files (a name it lists is one it takes).
  EXPECT_EQ(ContractError(json{{"extends", "opus.json"}})
                .rfind("user.json: $.extends: no built-in contract named \"opus.json\" (built-in: "
                       "aiter-decode-asm.json, ",
                       0),
            0u);
}

// A built-in of the name exists for another call kind: the error says so instead of "no
// built-in contract named".
TEST(Contract, ExtendsOfABuiltInOfAnotherCallNamesBothCalls) {
  EXPECT_EQ(ContractError(json{{"extends", "asm"}, {"call", "reduce"}}),
            "user.json: $.extends: the built-in contract \"asm\" (aiter-decode-asm.json) is a "
            "decode contract, and $.call is \"reduce\" (extend a \"reduce\" contract, or leave "
            "$.call out)");
  auto c = ParseContract(json{{"extends", "mla_reduce_v1"}, {"call", "reduce"}}, "user.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
}

// ---------------------------------------------------------------------------------------------
// Call tables
// ---------------------------------------------------------------------------------------------

TEST(CallTable, TheAtomTableAndItsProfiles) {
  auto t = BuiltinCallTable("atom");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->steps.size(), 3u);
  std::vector<std::string> names;
  for (const EngineProfile& e : BuiltinProfiles()) names.push_back(e.name);
  names.resize(3);  // then sglang's and vllm's (tests/sim/engines_test.cpp)
  EXPECT_EQ(names, (std::vector<std::string>{"atom-2026-03", "atom-2026-08", "atom-2026-11"}));
  EXPECT_EQ(BuiltinCallTable("nope").status().ToString(),
            "engine.table: no built-in call table \"nope\" (known: atom, sglang, vllm)");
  EXPECT_EQ(BuiltinCallTable("atom", {{"nope", "1"}}).status().ToString(),
            "builtin:atom.json: variables: no variable \"nope\" to override");
  auto bad_override = BuiltinCallTable("atom", {{"draft_rows", "R +"}});
  EXPECT_NE(bad_override.status().ToString().find("override of draft_rows"), std::string::npos);
}

json MinimalTable() {
  return json::parse(R"({"engine_table": 1, "name": "t", "source": "s", "profiles": [],
    "variables": [], "plan_buffers": [], "persistent": [],
    "steps": [{"step": "verify", "calls": []}]})");
}

TEST(CallTable, EveryErrorNamesTheJsonPath) {
  struct Case {
    std::string patch;
    std::string want;
  };
  const Case cases[] = {
      {R"({"engine_table": 2})", "t.json: $.engine_table: must be in 1..1 (got 2)"},
      {R"({"steps": 1})", "t.json: $.steps: must be an array (at most 1024 entries)"},
      {R"({"steps": [{"step": "draft_{s}", "for": "s", "from": 0, "to": "K", "calls": []},
                     {"step": "x", "calls": []}]})",
       ""},
      {R"({"steps": [{"step": "draft", "for": "s", "from": 0, "to": "K", "calls": []}]})",
       "t.json: $.steps[0].step: a repeated step's name must contain {s}"},
      {R"({"steps": [{"step": "v", "calls": [{"row": "T1", "call": "p", "kind": "plan_build",
          "inputs": "magic", "real": "B", "buffers": "main.", "capacity": "main."}]}]})",
       "t.json: $.steps[0].calls[0].inputs: unknown \"magic\" (known: verify_padded"},
      {R"({"steps": [{"step": "v", "calls": [{"row": "T5", "call": "d", "kind": "decode",
          "plan": "other", "q_rows": 1, "sparse": 0, "graph": 0, "max_seqlen_q": 1}]}]})",
       "t.json: $.steps[0].calls[0].plan: unknown \"other\" (known: main, sparse_mtp, "
       "draft_sparse, last)"},
      {R"({"steps": [{"step": "v", "calls": [{"row": "R", "call": "r", "kind": "reduce"}]}]})",
       "t.json: $.steps[0].calls[0].kind: a reduce follows its decode row"},
      {R"({"steps": [{"step": "v", "calls": [{"row": "F", "call": "f", "kind": "index_fill",
          "kernel": "g", "indices": "i", "indptr": "nope", "tokens": 1, "graph": 0}]}]})",
       "t.json: $.steps[0].calls[0].indptr: unknown \"nope\""},
      {R"({"variables": [{"name": "x", "value": "Bee"}]})",
       "t.json: $.variables[0].value: unknown name 'Bee'"},
      {R"({"profiles": [{"name": "p", "summary": "s", "flags": {"draft_rows": "all"}}]})",
       "t.json: $.profiles[0].flags.draft_rows: must be \"scheduled\" or \"padded\""},
      // Names a finding's signature holds (sim::IsSignatureName): a call named "main.plan" gave
      // findings that fuzz --resume and merge refuse.
      {R"({"steps": [{"step": "v", "calls": [{"row": "T5", "call": "main.decode", "kind": "decode",
          "plan": "main", "q_rows": 1, "sparse": 0, "graph": 0, "max_seqlen_q": 1}]}]})",
       "t.json: $.steps[0].calls[0].call: \"main.decode\" must be 1..128 of [A-Za-z0-9_-] (a "
       "finding's signature names it; fuzz --resume and merge refuse other characters)"},
      {R"({"steps": [{"step": "v", "calls": [{"row": "F", "call": "gather|x", "kind": "index_fill",
          "kernel": "g", "indices": "i", "indptr": "verify_kv_indptr", "tokens": 1, "graph": 0}]}]})",
       "t.json: $.steps[0].calls[0].call: \"gather|x\" must be 1..128 of [A-Za-z0-9_-]"},
      {R"({"steps": [{"step": "v", "calls": [{"row": "F", "call": "", "kind": "index_fill",
          "kernel": "g", "indices": "i", "indptr": "verify_kv_indptr", "tokens": 1, "graph": 0}]}]})",
       "t.json: $.steps[0].calls[0].call: \"\" must be 1..128 of [A-Za-z0-9_-]"},
      {R"({"steps": [{"step": "v", "calls": [{"row": "T5", "call": ")" + std::string(128, 'd') +
           R"(", "kind": "decode", "plan": "main", "q_rows": 1, "sparse": 0, "graph": 0,
           "max_seqlen_q": 1}]}]})",
       "t.json: $.steps[0].calls[0].call (its reduce): \"" + std::string(128, 'd') +
           "_reduce\" must be 1..128 of [A-Za-z0-9_-]"},
      {R"({"steps": [{"step": "verify step", "calls": []}]})",
       "t.json: $.steps[0].step: \"verify step\" must be 1..128 of [A-Za-z0-9_-]"},
      {R"({"steps": [{"step": "draft.{s}", "for": "s", "from": 0, "to": "K", "calls": []}]})",
       "t.json: $.steps[0].step: \"draft.0\" must be 1..128 of [A-Za-z0-9_-]"},
      {R"({"persistent": [{"name": "kv indptr", "rows": 1}]})",
       "t.json: $.persistent[0].name: \"kv indptr\" must be 1..128 of [A-Za-z0-9_.-]"},
      {R"({"plan_buffers": [{"prefix": "main/", "sizing_batch": 1, "qlen": 1, "topk": 0}]})",
       "t.json: $.plan_buffers[0].prefix: \"main/\" must be 1..128 of [A-Za-z0-9_.-]"},
      {R"({"persistent": [{"name": "kv.indptr-2_B", "rows": 1}],
          "steps": [{"step": "d-{s}_x", "for": "s", "from": 0, "to": "K", "calls": []}]})",
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.patch);
    json doc = MinimalTable();
    doc.merge_patch(json::parse(c.patch));
    auto t = ParseCallTable(doc, "t.json");
    const std::string err = t.ok() ? "" : t.status().ToString();
    if (c.want.empty())
      EXPECT_EQ(err, "");
    else
      EXPECT_EQ(err.rfind(c.want, 0), 0u) << err;
  }
}

// Every name of every built-in call table that a finding's signature can hold (each step at
// loop values 0, 1 and 63, each call and its reduce, each persistent buffer and plan buffer)
// makes a signature fuzz --resume and merge take (fuzz::CheckSignature), and a finding file name
// that maps back to it.
TEST(CallTable, EveryBuiltInNameFitsAFindingSignature) {
  std::set<std::string> tables;
  for (const EngineProfile& e : BuiltinProfiles()) tables.insert(e.table);
  EXPECT_EQ(tables, (std::set<std::string>{"atom", "sglang", "vllm"}));
  int signatures = 0;
  for (const std::string& name : tables) {
    auto t = BuiltinCallTable(name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    std::vector<std::string> buffers = {"q", "o", "kv_cache"};
    for (const PersistentSpec& p : (*t)->persistent) buffers.push_back(p.name);
    for (const PlanBufferSet& b : (*t)->plan_buffers) buffers.push_back(b.prefix + "work_info");
    for (const StepSpec& st : (*t)->steps) {
      for (int64_t s : {0, 1, 63}) {
        for (const CallRow& row : st.calls) {
          std::vector<std::string> calls = {row.call};
          if (row.kind == CallKind::kDecode) calls.push_back(ReduceCallName(row.call));
          for (const std::string& call : calls) {
            for (const std::string& buffer : buffers) {
              const std::string sig = StepName(st, s) + "|" + call + "|" + buffer + "|read|A";
              EXPECT_TRUE(fuzz::CheckSignature(sig, "sig").ok()) << name << ": " << sig;
              EXPECT_EQ(fuzz::FindingFileName(sig).find('|'), std::string::npos);
              ++signatures;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(signatures, 1000);
}

}  // namespace
}  // namespace mlasim::sim
