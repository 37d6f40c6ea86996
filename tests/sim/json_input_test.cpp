// Strict JSON (sim/json_input.h ParseJsonStrict): the document it builds is nlohmann's own, the
// JSON path of the first duplicate key, nlohmann's parse errors, linear time on many small
// containers (correctness only is asserted, never time), and the json_depth and json_values limits
// at their boundaries (the limit, one past it) through the function and the CLI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "ref/limits.h"
#include "sim/json_input.h"
#include "tools/mlasim/cli.h"

namespace mlasim::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class JsonStrict : public ::testing::Test {
 protected:
  void SetUp() override { ref::ResetLimits(); }
  void TearDown() override { ref::ResetLimits(); }
};

// `n` arrays nested: "[[...]]".
std::string Nested(int64_t n) {
  return std::string(static_cast<size_t>(n), '[') + std::string(static_cast<size_t>(n), ']');
}

// `n` objects nested: {"a":{"a":...{}}}.
std::string NestedObjects(int64_t n) {
  std::string s;
  for (int64_t i = 1; i < n; ++i) s += "{\"a\":";
  s += "{}";
  s += std::string(static_cast<size_t>(n - 1), '}');
  return s;
}

std::string MessageOf(const std::string& text) {
  auto j = ParseJsonStrict(text, "f");
  EXPECT_FALSE(j.ok()) << text.substr(0, 80);
  if (j.ok()) return "";
  EXPECT_EQ(j.status().field(), "f");
  return j.status().message();
}

TEST_F(JsonStrict, NamesTheFirstDuplicateKeyByItsFullPath) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"a": [0, 0, 0, {"b": 1, "b": 2}]})", "$.a[3].b"},
      {R"([{}, {"k": 1, "k": 2}])", "$[1].k"},
      {R"({"x": {"y": [[{"z": [{"q": 1, "q": [1]}]}]]}})", "$.x.y[0][0].z[0].q"},
      {R"({"a": 1, "a": 2, "b": 1, "b": 2})", "$.a"},               // the first one
      {R"({"b": {"c": 1, "c": 2}, "a": 1, "a": 2})", "$.b.c"},      // in document order
      {R"([{"k": 1}, {"k": 1}, {"k": 1, "k": 2}])", "$[2].k"},      // per object
      {R"({"a\"b": 1, "a\"b": 2})", "$.a\"b"},                      // the key unescaped
      {R"({"": 1, "": 2})", "$."},                                  // the empty key
      {R"({"m": {"k": {"z": 0}, "k": 1}})", "$.m.k"},               // after a nested object
      {R"({"a": [[], [[], {"k": {}, "k": {}}]]})", "$.a[1][1].k"},  // arrays in arrays
  };
  for (const auto& [text, path] : cases) {
    SCOPED_TRACE(text);
    EXPECT_EQ(MessageOf(text),
              "duplicate key " + std::string(path) + " (JSON objects must not repeat a key)");
  }
}

TEST_F(JsonStrict, AParseErrorAfterADuplicateIsReportedAsTheParseError) {
  EXPECT_EQ(MessageOf(R"({"a": 1, "a": 2)"),
            "malformed JSON: parse error at line 1, column 16: syntax error while parsing object - "
            "unexpected end of input; expected '}'");
}

TEST_F(JsonStrict, ParseErrorsAreNlohmannsWithoutItsPrefix) {
  EXPECT_EQ(MessageOf("{\"a\": "),
            "malformed JSON: parse error at line 1, column 7: syntax error while parsing value - "
            "unexpected end of input; expected '[', '{', or a literal");
  EXPECT_EQ(MessageOf("[1e400]"), "malformed JSON: number overflow parsing '1e400'");
  EXPECT_EQ(MessageOf("{} x"),
            "malformed JSON: parse error at line 1, column 4: syntax error while parsing value - "
            "invalid literal; last read: '{} x'; expected end of input");
  EXPECT_EQ(MessageOf(""),
            "malformed JSON: parse error at line 1, column 1: syntax error while parsing value - "
            "unexpected end of input; expected '[', '{', or a literal");
}

// A gzip or xz file given where JSON is read (a compressed scenario, layout, request, ...) is
// named by its compression from its magic bytes; it was "malformed JSON ... last read: '<U+001F>'".
// A part of a magic is no magic: malformed JSON as before.
TEST_F(JsonStrict, ACompressedFileIsNamedByItsMagicBytes) {
  const std::string gzip("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
  const std::string xz("\xfd\x37\x7a\x58\x5a\x00\x00\x04", 8);
  EXPECT_EQ(MessageOf(gzip),
            "gzip-compressed; decompress it first (this input is read as plain JSON)");
  EXPECT_EQ(MessageOf(xz), "xz-compressed; decompress it first (this input is read as plain JSON)");
  EXPECT_EQ(MessageOf(gzip.substr(0, 1)).rfind("malformed JSON: ", 0), 0u);
  EXPECT_EQ(MessageOf(xz.substr(0, 5)).rfind("malformed JSON: ", 0), 0u);
  EXPECT_STREQ(CompressionOf(gzip), "gzip");
  EXPECT_STREQ(CompressionOf(xz.substr(0, 6)), "xz");
  // zstd's frame magic and bzip2's "BZh" (no JSON text starts with either).
  const std::string zstd("\x28\xb5\x2f\xfd\x24\x00", 6), bzip2("BZh91AY&SY", 10);
  EXPECT_EQ(MessageOf(zstd),
            "zstd-compressed; decompress it first (this input is read as plain JSON)");
  EXPECT_EQ(MessageOf(bzip2),
            "bzip2-compressed; decompress it first (this input is read as plain JSON)");
  EXPECT_EQ(MessageOf(zstd.substr(0, 3)).rfind("malformed JSON: ", 0), 0u);
  EXPECT_EQ(MessageOf(bzip2.substr(0, 2)).rfind("malformed JSON: ", 0), 0u);
  EXPECT_EQ(CompressionOf(""), nullptr);
  EXPECT_EQ(CompressionOf("{}"), nullptr);
}

TEST_F(JsonStrict, BuildsTheSameDocumentAsNlohmann) {
  const std::string text =
      R"({"n": null, "t": true, "f": false, "i": -5, "u": 18446744073709551615,
          "big": 18446744073709551616, "d": 1.5, "s": "x\u00e9\n", "e": "",
          "a": [1, [2, {}], [], [[[]]]], "o": {"p": {}, "q": [null]}})";
  auto j = ParseJsonStrict(text, "f");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(*j, json::parse(text));
  EXPECT_EQ(j->dump(), json::parse(text).dump());
  EXPECT_TRUE((*j)["u"].is_number_unsigned());
  EXPECT_EQ((*j)["u"].get<uint64_t>(), UINT64_MAX);
  EXPECT_TRUE((*j)["big"].is_number_float());  // past 2^64 - 1: nlohmann's double, as before
  EXPECT_TRUE((*j)["i"].is_number_integer() && !(*j)["i"].is_number_unsigned());
  for (const char* scalar : {"0", "-1", "\"s\"", "null", "true", "2.5"}) {
    auto v = ParseJsonStrict(scalar, "f");
    ASSERT_TRUE(v.ok()) << scalar;
    EXPECT_EQ(*v, json::parse(scalar)) << scalar;
  }
  // Every built-in contract and call table, read both ways.
  int files = 0;
  for (const char* dir : {"sim/contracts", "sim/engines", "tests/cases"})
    for (const auto& e : fs::directory_iterator(fs::path(MLASIM_SOURCE_DIR) / dir)) {
      if (e.path().extension() != ".json") continue;
      std::ifstream f(e.path());
      std::stringstream ss;
      ss << f.rdbuf();
      auto mine = ParseJsonStrict(ss.str(), e.path().string());
      ASSERT_TRUE(mine.ok()) << mine.status().ToString();
      EXPECT_EQ(*mine, json::parse(ss.str())) << e.path();
      ++files;
    }
  EXPECT_GT(files, 20);
}

// A mebibyte of `[{},{},...]` took 75 s (26 s of CPU) with nlohmann's callback parser, whose
// end_object scans the parent array: quadratic. Asserted here: the result, not the time.
TEST_F(JsonStrict, AMebibyteOfEmptyObjectsParsesToThemAll) {
  const int64_t n = (int64_t{1} << 20) / 3;  // "{}," each
  std::string text = "[";
  for (int64_t i = 0; i < n; ++i) text += i ? ",{}" : "{}";
  text += "]";
  ASSERT_EQ(text.size(), 1048576u);
  auto j = ParseJsonStrict(text, "f");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  ASSERT_TRUE(j->is_array());
  ASSERT_EQ(j->size(), 349525u);
  for (const json& v : *j) ASSERT_TRUE(v.is_object() && v.empty());
  // The path of a duplicate at the end of it.
  text.pop_back();
  text += ",{\"k\":1,\"k\":2}]";
  EXPECT_EQ(MessageOf(text), "duplicate key $[349525].k (JSON objects must not repeat a key)");
}

TEST_F(JsonStrict, DepthAtTheLimitParsesOnePastItIsRefused) {
  EXPECT_EQ(ref::Limit(ref::LimitId::kJsonDepth), 512);
  const std::string too_deep =
      "JSON nesting depth (arrays and objects) is 513, above mlasim's limit of 512 (raise it "
      "with --limit json_depth=N or MLASIM_LIMITS=json_depth=N, up to 4096)";
  for (auto nested : {Nested, NestedObjects}) {
    auto ok = ParseJsonStrict(nested(512), "f");
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
    EXPECT_EQ(ok->dump(), nested(512));  // and it copies and dumps
    EXPECT_EQ(MessageOf(nested(513)), too_deep);
  }
  // At the hard maximum.
  ASSERT_TRUE(ref::SetLimits("json_depth=4096").ok());
  auto deepest = ParseJsonStrict(Nested(4096), "f");
  ASSERT_TRUE(deepest.ok()) << deepest.status().ToString();
  const json copy = *deepest;  // copying recurses once a level
  EXPECT_EQ(copy, *deepest);
  EXPECT_EQ(MessageOf(Nested(4097)),
            "JSON nesting depth (arrays and objects) is 4097, above mlasim's limit of 4096 "
            "(json_depth is at its hard maximum)");
  EXPECT_FALSE(ref::SetLimits("json_depth=4097").ok());
  // Lowered to 1: a scalar is depth 0, a container 1.
  ASSERT_TRUE(ref::SetLimits("json_depth=1").ok());
  EXPECT_TRUE(ParseJsonStrict("7", "f").ok());
  EXPECT_FALSE(ParseJsonStrict("[1, {}]", "f").ok());
  EXPECT_TRUE(ParseJsonStrict("[1, 2]", "f").ok());
  EXPECT_TRUE(ParseJsonStrict(R"({"a": 1})", "f").ok());
  EXPECT_EQ(MessageOf(R"({"a": []})").substr(0, 43), "JSON nesting depth (arrays and objects) is ");
}

// A million levels (2 MB of text, under the 64 MiB input limit) would overflow the stack of a
// recursive copy or dump; the parse stops at level 513 instead.
TEST_F(JsonStrict, AMillionLevelsAreRefusedNotOverflowed) {
  EXPECT_EQ(MessageOf(Nested(1000000)).substr(0, 46),
            "JSON nesting depth (arrays and objects) is 513");
  EXPECT_EQ(MessageOf(std::string(1000000, '[')).substr(0, 46),
            "JSON nesting depth (arrays and objects) is 513");
}

TEST_F(JsonStrict, ValuesAtTheLimitParseOnePastItAreRefused) {
  EXPECT_EQ(ref::Limit(ref::LimitId::kJsonValues), 4194304);
  ASSERT_TRUE(ref::SetLimits("json_values=5").ok());
  auto ok = ParseJsonStrict("[1, 2, [], {}]", "f");  // 5 values: the containers count
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 4u);
  ASSERT_TRUE(ParseJsonStrict(R"({"a": 1, "b": "x", "c": null, "d": false})", "f").ok());
  const std::string too_many =
      "JSON values (numbers, strings, arrays, objects, ...) is 6, above mlasim's limit of 5 "
      "(raise it with --limit json_values=N or MLASIM_LIMITS=json_values=N, up to 268435456)";
  EXPECT_EQ(MessageOf("[1, 2, [], {}, 5]"), too_many);
  EXPECT_EQ(MessageOf("[1, 2, [], {}, []]"), too_many);
  EXPECT_EQ(MessageOf(R"({"a": 1, "b": "x", "c": null, "d": false, "e": {}})"), too_many);
  ASSERT_TRUE(ref::SetLimits("json_values=1").ok());
  EXPECT_TRUE(ParseJsonStrict("\"one\"", "f").ok());
  EXPECT_TRUE(ParseJsonStrict("{}", "f").ok());
  EXPECT_EQ(MessageOf("[0]").substr(0, 55),
            "JSON values (numbers, strings, arrays, objects, ...) is");
}

// nlohmann's lexer ends the input at a NUL byte: "{...}\0garbage" parsed as "{...}" and the rest
// was dropped; a NUL inside a document read as an early end. JSON text holds no NUL byte.
TEST_F(JsonStrict, ANulByteIsRefusedWhereverItIs) {
  using namespace std::string_literals;
  EXPECT_EQ(MessageOf("{\"a\": 1}\0{\"a\": 2, garbage"s),
            "malformed JSON: a NUL byte at line 1, column 9 (JSON text holds none; a binary, "
            "padded or damaged file?)");
  EXPECT_EQ(
      MessageOf("{\"a\": 1}\n\0"s).rfind("malformed JSON: a NUL byte at line 2, column 1 ", 0), 0u);
  EXPECT_EQ(MessageOf("{\"a\":\0 1}"s).rfind("malformed JSON: a NUL byte at line 1, column 6 ", 0),
            0u);
  auto escaped = ParseJsonStrict(R"({"a": "x\u0000y"})", "f");  // a string's NUL, escaped
  ASSERT_TRUE(escaped.ok());
  EXPECT_EQ((*escaped)["a"].get<std::string>(), "x\0y"s);
}

// Through the CLI: exit 2, the field, the limit and how to raise it; raising it parses.
TEST_F(JsonStrict, CliRefusesTooDeepInputWithExit2AndTakesTheRaisedLimit) {
  const fs::path dir = fs::temp_directory_path() / "mlasim_json_input_test";
  fs::create_directories(dir);
  const fs::path deep = dir / "deep.json";
  std::ofstream(deep) << "{\"x\": " << Nested(600) << "}";
  std::ostringstream out, err;
  EXPECT_EQ(cli::RunMlasim({"plan", "--request", deep.string()}, out, err), 2);
  EXPECT_NE(err.str().find("deep.json': JSON nesting depth (arrays and objects) is 513, above "
                           "mlasim's limit of 512 (raise it with --limit json_depth=N"),
            std::string::npos)
      << err.str();
  std::ostringstream out2, err2;  // raised: the depth passes, the request itself is then read
  EXPECT_EQ(
      cli::RunMlasim({"--limit", "json_depth=601", "plan", "--request", deep.string()}, out2, err2),
      2);
  EXPECT_EQ(err2.str().find("nesting depth"), std::string::npos) << err2.str();
  fs::remove_all(dir);
}

// Text the reports print: C0 controls, DEL and the C1 controls (UTF-8 C2 80..C2 9F: U+009B is
// a CSI to a terminal, U+0085 a line break) are refused with their code point and byte; every
// other UTF-8 character is accepted. Session 22's first rule let C1 through ("a\u009b2Jb" named a
// replayed scenario, printed as is); a mutant that drops the C2 branch fails the C1 checks.
TEST(PrintableText, RefusesC0DelAndC1ControlsAcceptsOtherUtf8) {
  EXPECT_TRUE(
      PrintableText("$.name", "GLM-5.2 Mod\xc3\xa8le \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80")
          .ok());
  EXPECT_TRUE(PrintableText("$.name", "\xc2\xa0no-break space, \xc2\xbf").ok());  // U+00A0, U+00BF
  EXPECT_TRUE(PrintableText("$.description", "line one\nline two\ttab", true).ok());
  const auto refused = [](const std::string& text, bool multiline = false) {
    return PrintableText("$.name", text, multiline).ToString();
  };
  EXPECT_EQ(refused("a\nb"),
            "$.name: holds the control character U+000A at byte 1: text reports print it as is");
  EXPECT_EQ(refused(std::string("a\0b", 3)),
            "$.name: holds the control character U+0000 at byte 1: text reports print it as is");
  EXPECT_EQ(refused("ab\x7f"),
            "$.name: holds the control character U+007F at byte 2: text reports print it as is");
  EXPECT_EQ(refused("a\xc2\x9b"
                    "2J",
                    true),
            "$.name: holds the control character U+009B at byte 1: text reports print it as is");
  EXPECT_EQ(refused("\xc2\x80"),
            "$.name: holds the control character U+0080 at byte 0: text reports print it as is");
  EXPECT_EQ(refused("x\xc2\x85y", true),
            "$.name: holds the control character U+0085 at byte 1: text reports print it as is");
  EXPECT_EQ(refused("x\xc2\x9f"),
            "$.name: holds the control character U+009F at byte 1: text reports print it as is");
}

}  // namespace
}  // namespace mlasim::sim
