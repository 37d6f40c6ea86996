// Tests of `mlasim plan`, run in-process through RunMlasim (tools/mlasim/cli.h): outputs of the
// spec §6.1 example (JSON, table, .npy), the exit-code and error-message conventions for bad
// input, request files, and --check-golden on small corpora cut from tests/golden (xz).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ref/metadata.h"
#include "tools/io/input_file.h"
#include "tools/mlasim/cli.h"

namespace mlasim::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CliResult RunCli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  CliResult r;
  r.exit_code = RunMlasim(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / (std::string("mlasim_cli_") + info->test_suite_name() +
                                         "_" + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

 private:
  fs::path path_;
};

fs::path GoldenDir() {
  return fs::path(MLASIM_GOLDEN_DIR);
}

// The first `n` lines of a golden corpus (tests/golden/*.jsonl.xz) that satisfy `keep`.
std::vector<std::string> GoldenLines(const std::string& file, size_t n, bool (*keep)(const json&)) {
  std::vector<std::string> lines;
  auto in = io::InputFile::Open((GoldenDir() / file).string());
  if (!in.ok()) return lines;
  std::string line;
  while (lines.size() < n && std::getline((*in)->stream(), line)) {
    if (line.empty()) continue;
    if (keep(json::parse(line))) lines.push_back(line);
  }
  return lines;
}

bool IsPlanRecord(const json& rec) {
  return rec.contains("output") && !rec.contains("error");
}
bool AnyRecord(const json&) {
  return true;
}

// The corpus is tracked in the repository: its absence fails the test, never skips it.
#define ASSERT_GOLDEN_PRESENT(file)             \
  ASSERT_TRUE(fs::exists(GoldenDir() / (file))) \
      << "golden corpus missing: " << (GoldenDir() / (file)).string() << " (tests/golden/)"

const std::vector<std::string> kSpec61 = {"plan",    "--kv-lens", "300,40,700", "--qlen", "1",
                                          "--heads", "16",        "--clusters", "8"};

std::vector<std::string> With(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// Lines of `text` with runs of blanks collapsed to one space, trimmed.
std::vector<std::string> NormalizedLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string w, joined;
    while (words >> w) joined += (joined.empty() ? "" : " ") + w;
    lines.push_back(joined);
  }
  return lines;
}

bool HasLine(const std::vector<std::string>& lines, const std::string& want) {
  for (const auto& l : lines)
    if (l == want) return true;
  return false;
}

const json kSpec61WorkInfo = json::parse(R"([
  [0, 0, 0, 1, 0, 240, 60, 0],
  [0, 1, 0, 1, 240, 300, 0, 0],
  [1, -1, 1, 2, 300, 340, 0, 0],
  [2, 2, 2, 3, 340, 580, 460, 0],
  [2, 3, 2, 3, 580, 820, 220, 0],
  [2, 4, 2, 3, 820, 1040, 0, 0]])");

void ExpectSpec61Json(const json& j) {
  EXPECT_EQ(j.at("work_indptr"), json::parse("[0,1,2,3,4,5,6,6,6]"));
  EXPECT_EQ(j.at("reduce_indptr"), json::parse("[0,2,2,5]"));
  EXPECT_EQ(j.at("reduce_partial_map"), json::parse("[0,1,2,3,4]"));
  EXPECT_EQ(j.at("reduce_final_map"),
            json::parse(R"([{"tile":0,"pair":[0,1]},{"tile":2,"pair":[2,3]}])"));
  EXPECT_EQ(j.at("work_info"), kSpec61WorkInfo);
  EXPECT_EQ(j.at("derived").at("payload"), 31);
  EXPECT_EQ(j.at("derived").at("num_works"), 6);
  EXPECT_EQ(j.at("sizes").at("work_indptr"), 9);
  EXPECT_EQ(j.at("sizes").at("work_info_rows"), 10);
  EXPECT_EQ(j.at("input_violations"), json::array());
}

// ---------------------------------------------------------------------------------------------
// Spec §6.1 outputs
// ---------------------------------------------------------------------------------------------

TEST(CliPlan, Spec61JsonMatchesTheWorkedExample) {
  for (const char* planner : {"auto", "serial"}) {
    SCOPED_TRACE(planner);
    const CliResult r = RunCli(With(kSpec61, {"--json", "--planner", planner}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    ExpectSpec61Json(json::parse(r.out));
  }
}

TEST(CliPlan, Spec61TableHoldsTheWorkRowsAndMaps) {
  const CliResult r = RunCli(kSpec61);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto lines = NormalizedLines(r.out);
  ASSERT_FALSE(lines.empty());
  for (const char* part : {"target gfx942", "revision 2026-08", "clusters 8", "fold_ratio 1",
                           "pack 128", "qo_split no", "payload 31", "works 6"})
    EXPECT_NE(lines[0].find(part), std::string::npos) << part << " not in: " << lines[0];
  EXPECT_TRUE(HasLine(lines, "work cluster batch partial q kv kv_offset")) << r.out;
  for (const char* row :
       {"0 0 0 0 [0,1) [0,240) 60", "1 1 0 1 [0,1) [240,300) 0", "2 2 1 -1 [1,2) [300,340) 0",
        "3 3 2 2 [2,3) [340,580) 460", "4 4 2 3 [2,3) [580,820) 220", "5 5 2 4 [2,3) [820,1040) 0"})
    EXPECT_TRUE(HasLine(lines, row)) << "missing row '" << row << "' in:\n" << r.out;
  EXPECT_TRUE(HasLine(lines, "work_indptr [0,1,2,3,4,5,6,6,6]")) << r.out;
  EXPECT_TRUE(HasLine(lines, "reduce_indptr [0,2,2,5]")) << r.out;
  EXPECT_TRUE(HasLine(lines, "reduce_final_map 0:[0,1] 2:[2,3]")) << r.out;
  EXPECT_TRUE(HasLine(lines, "reduce_partial_map [0,1,2,3,4]")) << r.out;
  EXPECT_TRUE(HasLine(lines, "work_info int32 [10,8] 320 6 rows")) << r.out;
  EXPECT_TRUE(HasLine(lines, "input violations: none")) << r.out;
}

TEST(CliPlan, OutputIsDeterministic) {
  for (const auto& extra : {std::vector<std::string>{}, std::vector<std::string>{"--json"}}) {
    const CliResult a = RunCli(With(kSpec61, extra));
    const CliResult b = RunCli(With(kSpec61, extra));
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
  }
}

// ---------------------------------------------------------------------------------------------
// --npy
// ---------------------------------------------------------------------------------------------

struct Npy {
  std::string descr;
  std::string shape;  // as written in the header, e.g. "(10, 8)"
  std::string data;   // raw little-endian bytes
};

// Reads a version 1.0 .npy file, checking the magic and the header layout.
Npy ReadNpy(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Npy npy;
  EXPECT_GE(bytes.size(), 10u) << path;
  if (bytes.size() < 10) return npy;
  EXPECT_EQ(bytes.substr(0, 6), std::string("\x93NUMPY", 6)) << path;
  EXPECT_EQ(bytes[6], 1) << path;  // version 1.0
  EXPECT_EQ(bytes[7], 0) << path;
  const size_t header_len = static_cast<unsigned char>(bytes[8]) |
                            (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u) << path;  // data aligned as numpy requires
  const std::string header = bytes.substr(10, header_len);
  EXPECT_EQ(header.back(), '\n');
  auto value_of = [&](const std::string& key, char open, char close) {
    const size_t k = header.find("'" + key + "': ");
    if (k == std::string::npos) return std::string();
    const size_t b = header.find(open, k + key.size() + 3);
    const size_t e = header.find(close, b + 1);
    return header.substr(b, e - b + 1);
  };
  npy.descr = value_of("descr", '\'', '\'');
  npy.shape = value_of("shape", '(', ')');
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
  npy.data = bytes.substr(10 + header_len);
  return npy;
}

std::vector<int32_t> Int32s(const std::string& data) {
  std::vector<int32_t> v(data.size() / 4);
  std::memcpy(v.data(), data.data(), v.size() * 4);
  return v;
}

TEST(CliPlan, NpyWritesTheFullBuffersInAitersDtypes) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "nested" / "npy";  // created by mlasim
  const CliResult r = RunCli(With(kSpec61, {"--npy", dir.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote 6 .npy files"), std::string::npos) << r.out;

  const std::map<std::string, std::pair<std::string, std::string>> want = {
      {"work_metadata_ptrs.npy", {"'<u8'", "(2,)"}},
      {"work_indptr.npy", {"'<i4'", "(9,)"}},
      {"work_info.npy", {"'<i4'", "(10, 8)"}},
      {"reduce_indptr.npy", {"'<i4'", "(4,)"}},
      {"reduce_final_map.npy", {"'<i4'", "(3, 2)"}},
      {"reduce_partial_map.npy", {"'<i4'", "(10,)"}}};
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, want.size());
  const std::map<std::string, size_t> elements = {
      {"work_metadata_ptrs.npy", 2}, {"work_indptr.npy", 9},      {"work_info.npy", 80},
      {"reduce_indptr.npy", 4},      {"reduce_final_map.npy", 6}, {"reduce_partial_map.npy", 10}};
  std::map<std::string, Npy> got;
  for (const auto& [name, dt] : want) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(fs::exists(dir / name));
    got[name] = ReadNpy(dir / name);
    EXPECT_EQ(got[name].descr, dt.first);
    EXPECT_EQ(got[name].shape, dt.second);
    EXPECT_EQ(got[name].data.size(),
              elements.at(name) * (name == "work_metadata_ptrs.npy" ? 8 : 4));
  }
  const int32_t poison = ref::Plan::kPoison;
  EXPECT_EQ(Int32s(got["work_indptr.npy"].data), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 6, 6}));
  EXPECT_EQ(Int32s(got["reduce_indptr.npy"].data), (std::vector<int32_t>{0, 2, 2, 5}));
  // Tile 1 is not split: its reduce_final_map row is never written and holds the poison.
  EXPECT_EQ(Int32s(got["reduce_final_map.npy"].data),
            (std::vector<int32_t>{0, 1, poison, poison, 2, 3}));
  EXPECT_EQ(Int32s(got["reduce_partial_map.npy"].data),
            (std::vector<int32_t>{0, 1, 2, 3, 4, poison, poison, poison, poison, poison}));
  const std::vector<int32_t> wi = Int32s(got["work_info.npy"].data);
  ASSERT_EQ(wi.size(), 80u);
  constexpr size_t kWidth = ref::kWorkInfoWidth;
  for (size_t w = 0; w < 6; ++w)
    for (size_t f = 0; f < kWidth; ++f)
      EXPECT_EQ(wi[w * kWidth + f], kSpec61WorkInfo[w][f].get<int32_t>());
  for (size_t i = 6 * kWidth; i < wi.size(); ++i) EXPECT_EQ(wi[i], poison) << i;
}

TEST(CliPlan, NpyRefusesAPathThatIsAFile) {
  TempDir tmp;
  const std::string file = tmp.Write("not_a_dir", "x");
  const CliResult r = RunCli(With(kSpec61, {"--npy", file}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("mlasim plan: error: --npy: ", 0), 0u) << r.err;
}

// ---------------------------------------------------------------------------------------------
// Bad input: exit 2, nothing on stdout, `mlasim plan: error: FIELD: reason` on stderr.
// ---------------------------------------------------------------------------------------------

const char* kValidInput = R"({"target": "gfx942", "cu_count": 8, "heads_per_head_k": 16,
  "q_dtype": "bf16", "kv_dtype": "bf16", "kv_indptr": [0, 300, 340, 1040]})";

TEST(CliPlan, BadInputExitsTwoAndNamesTheField) {
  TempDir tmp;
  const std::string malformed = tmp.Write("malformed.json", "{\"target\": \"gfx942\",\n  ");
  json unknown = json::parse(kValidInput);
  unknown["kv_lens"] = json::array({1, 2});
  const std::string unknown_key = tmp.Write("unknown.json", unknown.dump());
  json decreasing = json::parse(kValidInput);
  decreasing["kv_indptr"] = json::array({0, 300, 200, 1040});
  const std::string decreasing_file = tmp.Write("decreasing.json", decreasing.dump());
  json heads24 = json::parse(kValidInput);
  heads24["heads_per_head_k"] = 24;
  const std::string heads24_file = tmp.Write("heads24.json", heads24.dump());
  const std::string valid = tmp.Write("valid.json", kValidInput);
  const std::string array_file = tmp.Write("array.json", "[1, 2, 3]");

  struct Case {
    std::vector<std::string> args;
    std::string field;
  };
  const std::vector<Case> cases = {
      {{"plan", "--kv-lens", "300,40,700", "--heads", "24"}, "--heads"},
      {{"plan", "--kv-lens", "300,40,700", "--heads", "12"}, "--heads"},
      {{"plan", "--kv-lens", "300,40,700", "--heads", "99999999999999999999"}, "--heads"},
      {{"plan", "--kv-lens", "300,40,700", "--page-size", "3"}, "--page-size"},
      {{"plan", "--kv-lens", "300,40,700", "--kv-granularity", "0"}, "--kv-granularity"},
      {{"plan", "--kv-lens", "1,x"}, "--kv-lens"},
      {{"plan", "--kv-lens", "-5"}, "--kv-lens"},
      {{"plan", "--kv-lens", ""}, "--kv-lens"},
      {{"plan", "--kv-lens", "1,,2"}, "--kv-lens"},
      {{"plan", "--kv-lens", "2000000000,2000000000"}, "--kv-lens"},
      {{"plan", "--kv-lens", "300", "--clusters", "100000"}, "--clusters"},
      // Sparse KV positions (tokens x top-k pages) past int32 inside the planner.
      {{"plan", "--kv-lens", "17,17,15", "--qlen", "4096", "--heads", "64", "--page-size", "64",
        "--topk", "16777216", "--kv-dtype", "fp8", "--target", "gfx950"},
       "--topk"},
      {{"plan", "--kv-lens", "300", "--qlen", "two"}, "--qlen"},
      {{"plan", "--kv-lens", "300", "--clusters", "0"}, "--clusters"},
      {{"plan", "--kv-lens", "300", "--target", "gfx1100"}, "--target"},
      {{"plan", "--kv-lens", "300", "--revision", "2025-01"}, "--revision"},
      {{"plan", "--kv-lens", "300", "--q-dtype", "int8"}, "--q-dtype"},
      {{"plan", "--kv-lens", "300", "--topk", "-7"}, "--topk"},
      {{"plan", "--kv-lens", "300", "--max-split-per-batch", "0"}, "--max-split-per-batch"},
      {{"plan", "--kv-lens", "300", "--planner", "fastest"}, "--planner"},
      {{"plan", "--kv-lens", "300", "--qlen", "2", "--planner", "parallel"}, "--planner"},
      {{"plan", "--heads", "16"}, "--kv-lens"},
      {{"plan"}, "--kv-lens"},
      {{"plan", "--request", (tmp.path() / "missing.json").string()}, "--request"},
      {{"plan", "--request", tmp.path().string()}, "--request"},
      {{"plan", "--request", malformed}, "--request"},
      {{"plan", "--request", array_file}, "--request"},
      {{"plan", "--request", unknown_key}, "input.kv_lens"},
      {{"plan", "--request", decreasing_file}, "input.kv_indptr[2]"},
      {{"plan", "--request", heads24_file}, "input.heads_per_head_k"},
      {{"plan", "--request", valid, "--kv-lens", "300"}, "--request"},
      {{"plan", "--request", valid, "--heads", "16"}, "--request"},
      {{"plan", "--check-golden", "x.jsonl", "--json"}, "--check-golden"},
  };
  for (const Case& c : cases) {
    std::string cmd;
    for (const auto& a : c.args) cmd += " '" + a + "'";
    SCOPED_TRACE("mlasim" + cmd);
    const CliResult r = RunCli(c.args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    const std::string prefix = "mlasim plan: error: " + c.field + ": ";
    EXPECT_EQ(r.err.rfind(prefix, 0), 0u) << "stderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(CliPlan, ParseErrorsExitTwo) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"plan", "--kv-lens", "300", "--no-such-flag"},
           {"plan", "--kv-lens", "300", "--heads", "16", "--heads", "32"},
           {"plan", "--kv-lens"},
           {"frobnicate"},
           {}}) {
    const CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("mlasim", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(": error: "), std::string::npos) << r.err;
  }
}

TEST(CliPlan, ParseErrorsNameTheField) {
  // CLI11's own messages are rewritten to the `FIELD: reason` form of every other error.
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"plan", "--kv-lens", "300", "--no-such-flag"},
       "mlasim plan: error: --no-such-flag: unknown option (run 'mlasim plan --help' for usage)\n"},
      {{"plan", "--kv-lens", "300", "extra1", "extra2"},
       "mlasim plan: error: extra1: unexpected argument (also unexpected: extra2) (run 'mlasim "
       "plan --help' for "
       "usage)\n"},
      {{"plan", "--kv-lens"},
       "mlasim plan: error: --kv-lens: 1 required LEN,... missing (run 'mlasim plan --help' for "
       "usage)\n"},
      {{"explain-fault", "--address", "0x10"},
       "mlasim explain-fault: error: --layout: required (run 'mlasim explain-fault --help' for "
       "usage)\n"},
  };
  for (const auto& [args, want] : cases) {
    const CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, want);
  }
}

TEST(CliFlags, BadValuesExitTwoNamingTheFlag) {
  // Across subcommands: the exact first words of stderr (flag and reason).
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"numerics", "--builtin", "seed", "--seed", "-1"},
       "mlasim numerics: error: --seed: '-1' is not a non-negative decimal integer"},
      {{"numerics", "--builtin", "seed", "--seed", "0x10"},
       "mlasim numerics: error: --seed: '0x10' is not a decimal integer"},
      {{"mutants", "--seed", "+1"}, "mlasim mutants: error: --seed: '+1' is not a decimal integer"},
      {{"numerics", "--builtin", "seed", "--seed", "abc"}, "mlasim numerics: error: --seed: "},
      {{"mutants", "--seed", "99999999999999999999999"},
       "mlasim mutants: error: --seed: '99999999999999999999999' is an integer above 64 bits (the "
       "largest is 18446744073709551615)"},
      {{"replay", "--builtin", "seed", "--profile", ""},
       "mlasim replay: error: --profile: must not be empty"},
      {{"replay", "--builtin", "seed", "--layout-out", "/dev/full"},
       "mlasim replay: error: --layout-out: cannot write /dev/full: no space left on the device "
       "(the disk is full)"},
      {{"fuzz", "--reproduce", "5"}, "mlasim fuzz: error: --size: required with --reproduce"},
      {{"fuzz", "--reproduce", "5", "--size", "20", "--shrink-path", "[1,"},
       "mlasim fuzz: error: --shrink-path: must look like [3,0,1]"},
      {{"fuzz", "--reproduce", "5", "--size", "20", "--shrink-path", "[99]"},
       "mlasim fuzz: error: --shrink-path: step 0 names shrink 99 but the case has only "},
      {{"fuzz", "--size", "3"}, "mlasim fuzz: error: --size: only with --reproduce SEED"},
      {{"fuzz", "--cases", "-5"},
       "mlasim fuzz: error: --cases: must be >= 0, or -1 for a time-only run"},
      {{"plan", "--kv-lens", "3", "--heads", "16", "--heads", "32"},
       "mlasim plan: error: --heads: given more than once"},
      {{"numerics", "--builtin", "seed", "--small-dims", "--full-dims"},
       "mlasim numerics: error: --full-dims: contradicts --small-dims"},
      {{"mutants", "--budget", "0"},
       "mlasim mutants: error: --budget: must be a number of cases in 1..1000000"},
      {{"mutants", "--budget", "1000001"},
       "mlasim mutants: error: --budget: must be a number of cases in 1..1000000"},
      {{"mutants", "--only", "nope"}, "mlasim mutants: error: --only: no mutant named 'nope'"},
      {{"numerics", "--builtin", "seed", "--mutant", "nope"},
       "mlasim numerics: error: --mutant: no numerics mutant named 'nope'"},
  };
  for (const auto& [args, want] : cases) {
    const CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << r.err;
    EXPECT_EQ(r.err.rfind(want, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// Integer options CLI11 converts (--launch-grid, --cases, --jobs, --batch, ...) read decimal as the
// flags mlasim parses itself do: CLI11 alone (strtoll base 0) read "010" as 8 and "0x10" as 16.
// Leading zeros are dropped; any other form (0x, +, an exponent, a lone -) is refused naming the
// option, in one wording whichever parser reads the flag.
TEST(CliFlags, IntegerOptionsReadDecimal) {
  for (const auto& [text, want] : std::vector<std::pair<std::string, int>>{
           {"010", 10}, {"0009", 9}, {" 012 ", 12}, {"9", 9}, {"01048576", 1048576}}) {
    const CliResult r = RunCli(With(kSpec61, {"--launch-grid", text, "--json"}));
    EXPECT_EQ(r.exit_code, 1) << text << ": " << r.err;  // any grid but 8 fails the check
    EXPECT_EQ(json::parse(r.out).at("check").at("launch_grid"), want) << text;
  }
  const std::pair<std::vector<std::string>, std::string> refused[] = {
      {With(kSpec61, {"--launch-grid", "0x10"}),
       "mlasim plan: error: --launch-grid: '0x10' is not a decimal integer (run 'mlasim plan "
       "--help' for usage)\n"},
      {With(kSpec61, {"--launch-grid", "-0X1"}),
       "mlasim plan: error: --launch-grid: '-0X1' is not a decimal integer (run 'mlasim plan "
       "--help' for usage)\n"},
      {With(kSpec61, {"--launch-grid", "-00"}),
       "mlasim plan: error: --launch-grid: must be in 1..1048576, got 0\n"},
      {With(kSpec61, {"--launch-grid", "01048577"}),
       "mlasim plan: error: --launch-grid: must be in 1..1048576, got 1048577\n"},
      {{"fuzz", "--cases", "010", "--jobs", "0x2"},
       "mlasim fuzz: error: --jobs: '0x2' is not a decimal integer (run 'mlasim fuzz --help' for "
       "usage)\n"},
      {{"triage", "--batch", "0x8"},
       "mlasim triage: error: --batch: '0x8' is not a decimal integer (run 'mlasim triage --help' "
       "for usage)\n"},
      // Every form that is not decimal digits gets one wording, whichever parser reads the flag
      // (plan's own --heads said "'+16' is not an integer" and "'0x10' is not a decimal
      // integer"; CLI11 took "+16" as 16 and called "1e300" "not a valid value").
      {{"plan", "--kv-lens", "3", "--heads", "0x10"},
       "mlasim plan: error: --heads: '0x10' is not a decimal integer (run 'mlasim plan --help' "
       "for usage)\n"},
      {{"plan", "--kv-lens", "3", "--heads", "+16"},
       "mlasim plan: error: --heads: '+16' is not a decimal integer (run 'mlasim plan --help' "
       "for usage)\n"},
      {{"plan", "--kv-lens", "3", "--heads", "1e3"},
       "mlasim plan: error: --heads: '1e3' is not a decimal integer (run 'mlasim plan --help' "
       "for usage)\n"},
      {{"fuzz", "--cases", "+16"},
       "mlasim fuzz: error: --cases: '+16' is not a decimal integer (run 'mlasim fuzz --help' for "
       "usage)\n"},
      {{"fuzz", "--cases", "1e300"},
       "mlasim fuzz: error: --cases: '1e300' is not a decimal integer (run 'mlasim fuzz --help' "
       "for usage)\n"},
      {{"triage", "--batch", "-"},
       "mlasim triage: error: --batch: '-' is not a decimal integer (run 'mlasim triage --help' "
       "for usage)\n"},
  };
  for (const auto& [args, want] : refused) {
    const CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err, want);
  }
}

// An integer flag given 2^31 (within 64 bits, beyond int32) reaches its own range check, which
// names the range; these flags were int32 and CLI11 refused the text with "'2147483648' is outside
// this option's integer range", naming no range (round 8).
TEST(CliFlags, IntegerFlagsAboveInt32NameTheirRange) {
  const std::string big = "2147483648";  // 2^31
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"fuzz", "--cases", "1", "--jobs", big}, "mlasim fuzz: error: --jobs: must be in 1..256\n"},
      {{"fuzz", "--cases", "1", "--shrink-steps", big},
       "mlasim fuzz: error: --shrink-steps: must be in 0..100000\n"},
      {{"fuzz", "--reproduce", "1", "--size", big},
       "mlasim fuzz: error: --size: must be in 1..1000 (a RapidCheck size)\n"},
      {{"fuzz", "--gpu", "sentinel", "--kernel-under-test", "lib.so", "--cases", "1", "--device",
        big},
       "mlasim fuzz: error: --device: must be in 0..1023\n"},
      {{"numerics", "--builtin", "seed", "--max-context", big},
       "mlasim numerics: error: --max-context: must be in [1, 1048576]\n"},
      {{"effectiveness", "--seeds", big}, "mlasim effectiveness: error: --seeds: must be in 1..1000\n"},
      {{"triage", "--model", "glm-5.2", "--batch", "1", "--heads", big},
       "mlasim triage: error: --heads: must be 1..1024\n"},
      {{"triage", "--model", "glm-5.2", "--batch", "1", "--tp", big},
       "mlasim triage: error: --tp: must be 1..64\n"},
      {{"triage", "--model", "glm-5.2", "--batch", "1", "--dp", big},
       "mlasim triage: error: --dp: must be 1..64\n"},
      {{"triage", "--model", "glm-5.2", "--batch", "1", "--mtp-k", big},
       "mlasim triage: error: --mtp-k: must be 0..7\n"},
      {{"triage", "--model", "glm-5.2", "--batch", big},
       "mlasim triage: error: --batch: must be 1..4096\n"},
      {{"triage", "--model", "glm-5.2", "--batch", "4294967297"},  // 2^32 + 1 is not 1
       "mlasim triage: error: --batch: must be 1..4096\n"},
      {{"triage", "--model", "glm-5.2", "--batch", "1", "--graph", big},
       "mlasim triage: error: --graph: must be 1..4096 (at least --batch: the batch is padded up "
       "to it)\n"},
      {{"triage", "--model", "glm-5.2", "--batch", "1", "--jobs", big},
       "mlasim triage: error: --jobs: must be 1..64\n"},
      {{"triage", "--model", "glm-5.2", "--batch", "1", "--shrink-steps", big},
       "mlasim triage: error: --shrink-steps: must be 0..1000\n"},
      {{"triage", "--model", "glm-5.2", "--batch", "1", "--shrink-steps", "-2147483649"},
       "mlasim triage: error: --shrink-steps: must be 0..1000\n"},
  };
  for (const auto& [args, want] : cases) {
    const CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ' ' << args.back() << ": " << r.err;
    EXPECT_EQ(r.err, want);
    EXPECT_EQ(r.out, "");
  }
}

// Every integer flag of every command (as --help lists them: INT, N, UINT types), given 2^31:
// none answers with CLI11's rangeless "outside this option's integer range" (the mutant: one
// flag bound to an int32 again fails here).
TEST(CliFlags, NoIntegerFlagRefuses2To31WithoutItsRange) {
  int flags = 0;
  for (const char* command : {"replay", "explain-fault", "fuzz", "mutants", "plan", "numerics",
                              "check", "effectiveness", "triage"}) {
    const CliResult help = RunCli({command, "--help"});
    std::istringstream lines(help.out);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string flag, type;
      words >> flag >> type;
      if (flag.rfind("--", 0) != 0 || flag == "--help") continue;
      if (type.rfind("INT", 0) != 0 && type.rfind("N", 0) != 0 && type.rfind("UINT", 0) != 0)
        continue;
      if (type.rfind("NAME", 0) == 0) continue;
      ++flags;
      // CLI11 converts values before it refuses an unknown flag: the unknown flag keeps any
      // command from running while the conversion is still checked.
      const CliResult r = RunCli({command, flag, "2147483648", "--no-such-flag"});
      EXPECT_EQ(r.exit_code, 2) << command << ' ' << flag;
      EXPECT_EQ(r.err.find("outside this option's integer range"), std::string::npos)
          << command << ' ' << flag << ": " << r.err;
    }
  }
  EXPECT_GE(flags, 30);  // the sweep found the flags (32 on 2026-12-03)
}

TEST(CliPlan, HelpAndVersionExitZero) {
  const CliResult help = RunCli({"plan", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--kv-lens"), std::string::npos);
  EXPECT_NE(help.out.find("--check-golden"), std::string::npos);
  const CliResult version = RunCli({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("mlasim ", 0), 0u) << version.out;
}

// ---------------------------------------------------------------------------------------------
// The plan check (issue 10 §4): every printed plan is checked, with a launch of aiter's grid
// (work_indptr entries - 1) or of --launch-grid N workgroups; an invalid plan exits 1.
// ---------------------------------------------------------------------------------------------

// The diagnostics of `mlasim plan ... --json`, as "severity code" strings.
std::vector<std::string> CheckCodes(const CliResult& r) {
  std::vector<std::string> codes;
  const json out = json::parse(r.out);
  for (const json& d : out.at("check").at("diagnostics"))
    codes.push_back(d.at("severity").get<std::string>() + " " + d.at("code").get<std::string>());
  return codes;
}

std::string Request(int32_t cu_count, int32_t num_heads_k) {
  return json{{"target", "gfx942"},         {"cu_count", cu_count}, {"heads_per_head_k", 8},
              {"num_heads_k", num_heads_k}, {"q_dtype", "bf16"},    {"kv_dtype", "bf16"},
              {"kv_indptr", {0, 300, 340}}}
      .dump();
}

TEST(CliPlanCheck, ValidPlanPassesAgainstAitersGrid) {
  const CliResult r = RunCli(kSpec61);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(HasLine(NormalizedLines(r.out),
                      "plan check (launch of 8 workgroups (aiter's grid: work_indptr - 1)): ok"))
      << r.out;
  const CliResult j = RunCli(With(kSpec61, {"--json"}));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(json::parse(j.out).at("check"),
            json::parse(R"({"ok": true, "launch_grid": 8, "launch_grid_given": false,
                            "diagnostics": []})"));
}

TEST(CliPlanCheck, ZeroClustersExitOneNamingTheCause) {
  TempDir tmp;
  const std::string file = tmp.Write("zero.json", Request(1, 2));  // 1 CU / 2 KV heads
  const CliResult r = RunCli({"plan", "--request", file});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(HasLine(NormalizedLines(r.out),
                      "error zero_clusters: the planner has 0 clusters (cu_count 1 / num_heads_k "
                      "2): no workgroup runs, so none of the 2 requests' output rows is ever "
                      "written"))
      << r.out;
  const CliResult j = RunCli({"plan", "--request", file, "--json"});
  EXPECT_EQ(j.exit_code, 1);
  EXPECT_EQ(CheckCodes(j),
            (std::vector<std::string>{"error zero_clusters", "error launch_reads_unwritten"}));
  EXPECT_FALSE(json::parse(j.out).at("check").at("ok").get<bool>());
}

TEST(CliPlanCheck, TilesNotCoveredExitOne) {
  // The mutant drops the final piece of every split tile: tile 2's last 220 tokens are never
  // attended.
  const CliResult r =
      RunCli(With(kSpec61, {"--planner", "serial", "--mutant", "planner-drop-last-piece"}));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(HasLine(NormalizedLines(r.out),
                      "error tile_kv_not_covered: tile 2 (batch 2, q [2,3)): pieces end at 820, "
                      "the tile's KV ends at 1040 (220 positions never attended)"))
      << r.out;
  // The real planner on the same request passes.
  EXPECT_EQ(RunCli(With(kSpec61, {"--planner", "serial"})).exit_code, 0);
}

TEST(CliPlanCheck, PiecesShorterThanQlenExitOne) {
  const std::vector<std::string> mtp = {"plan",       "--kv-lens", "899",       "--qlen", "7",
                                        "--clusters", "11",        "--planner", "serial"};
  EXPECT_EQ(RunCli(mtp).exit_code, 0);  // the tail rule keeps every piece >= 7 tokens
  const CliResult r = RunCli(With(mtp, {"--mutant", "planner-no-tail-rule"}));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(HasLine(NormalizedLines(r.out),
                      "error piece_shorter_than_qlen: tile 0 (batch 0, q [0,7)): piece [784,896) "
                      "leaves 3 tokens, fewer than the tile's 7 q rows: causal rows see no key in "
                      "a piece (NaN partials; the tail rule prevents this)"))
      << r.out;
}

TEST(CliPlanCheck, StoresPastABufferAndInputReadsExitOne) {
  const CliResult sized =
      RunCli(With(kSpec61, {"--mutant", "sizing-undersized-partial-map", "--json"}));
  EXPECT_EQ(sized.exit_code, 1) << sized.err;
  EXPECT_EQ(CheckCodes(sized),
            (std::vector<std::string>{"error buffer_overflow", "error reduce_group_mismatch",
                                      "error partial_rows_exceed_logits"}));
  // Folded heads (48 -> 3 x 16) with pages: aiter reads kv_last_page_lens at the virtual batch.
  const CliResult folded = RunCli({"plan", "--kv-lens", "1476,1476,1476", "--heads", "48", "--qlen",
                                   "2", "--page-size", "16", "--json"});
  EXPECT_EQ(folded.exit_code, 1) << folded.err;
  const std::vector<std::string> codes = CheckCodes(folded);
  ASSERT_FALSE(codes.empty());
  EXPECT_EQ(std::count(codes.begin(), codes.end(), "error input_read_out_of_range"),
            static_cast<std::ptrdiff_t>(codes.size()));
}

TEST(CliPlanCheck, LaunchGridPastWorkIndptrExitOne) {
  // 8 clusters, work_indptr holds 9 entries: workgroup 8 reads work_indptr[9].
  const CliResult r = RunCli(With(kSpec61, {"--launch-grid", "9"}));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::vector<std::string> lines = NormalizedLines(r.out);
  EXPECT_TRUE(HasLine(lines, "plan check (launch of 9 workgroups (--launch-grid)): 1 error"));
  EXPECT_TRUE(HasLine(lines,
                      "error launch_reads_past_buffer: a launch of 9 workgroups reads "
                      "work_indptr[9] past the end of work_indptr (9 entries): workgroup c reads "
                      "work_indptr[c] and [c + 1]"))
      << r.out;
  const CliResult big = RunCli(With(kSpec61, {"--launch-grid", "1048576", "--json"}));
  EXPECT_EQ(big.exit_code, 1);
  EXPECT_EQ(json::parse(big.out).at("check").at("diagnostics").at(0).at("message"),
            "a launch of 1048576 workgroups reads 1048568 entries, work_indptr[9] to [1048576] "
            "past the end of work_indptr (9 entries): workgroup c reads work_indptr[c] and [c + "
            "1]");
}

TEST(CliPlanCheck, LaunchReadsEntriesNoPlannerWroteExitOne) {
  // 8 CUs / 2 KV heads = 4 clusters, but info_v1 sizes work_indptr for 8: aiter's grid (8)
  // reads work_indptr[5..8], which the planner never writes.
  TempDir tmp;
  const std::string file = tmp.Write("two_kv_heads.json", Request(8, 2));
  const CliResult r = RunCli({"plan", "--request", file});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(HasLine(NormalizedLines(r.out),
                      "error launch_reads_unwritten: a launch of 8 workgroups reads 4 entries, "
                      "work_indptr[5] to [8], which no planner wrote (the planner has 4 clusters "
                      "and writes work_indptr[0..4]): stale memory on a GPU decides which work "
                      "runs"))
      << r.out;
  // A launch of exactly the planner's clusters is fine.
  const CliResult four = RunCli({"plan", "--request", file, "--launch-grid", "4"});
  EXPECT_EQ(four.exit_code, 0) << four.out;
}

TEST(CliPlanCheck, LaunchGridSmallerThanClusters) {
  // Clusters 4..7 hold work items 4 and 5: a grid of 4 never runs them.
  const CliResult four = RunCli(With(kSpec61, {"--launch-grid", "4"}));
  EXPECT_EQ(four.exit_code, 1) << four.out;
  EXPECT_TRUE(HasLine(NormalizedLines(four.out),
                      "error launch_skips_work: a launch of 4 workgroups leaves clusters 4..7 of 8 "
                      "without a workgroup: work items [4,6) never run (their output rows are "
                      "never written, or their partial rows never reduced)"))
      << four.out;
  const CliResult one = RunCli(With(kSpec61, {"--launch-grid", "1", "--json"}));
  EXPECT_EQ(one.exit_code, 1);
  EXPECT_EQ(CheckCodes(one), std::vector<std::string>{"error launch_skips_work"});
  // Cluster 7 holds no work: leaving it out is only a warning, exit 0.
  const CliResult seven = RunCli(With(kSpec61, {"--launch-grid", "7"}));
  EXPECT_EQ(seven.exit_code, 0) << seven.out;
  EXPECT_TRUE(HasLine(NormalizedLines(seven.out),
                      "plan check (launch of 7 workgroups (--launch-grid)): ok (1 warning)"));
  EXPECT_EQ(RunCli(With(kSpec61, {"--launch-grid", "8"})).exit_code, 0);
}

TEST(CliPlanCheck, BadLaunchGridAndMutantExitTwo) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--launch-grid", "0"}, "--launch-grid: must be in 1..1048576, got 0"},
      {{"--launch-grid", "-3"}, "--launch-grid: must be in 1..1048576, got -3"},
      {{"--launch-grid", "1048577"}, "--launch-grid: must be in 1..1048576, got 1048577"},
      {{"--mutant", "bogus"},
       "--mutant: unknown planner mutant 'bogus' (expected none, planner-no-tail-rule, "
       "planner-partial-map-off-by-one, sizing-undersized-partial-map, planner-drop-last-piece, "
       "planner-leaks-state-into-pad or planner-ragged-rows-by-max)"}};
  for (const auto& [args, message] : cases) {
    const CliResult r = RunCli(With(kSpec61, args));
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args[1];
    EXPECT_EQ(r.err, "mlasim plan: error: " + message + "\n");
    EXPECT_EQ(r.out, "");
  }
  const CliResult text = RunCli(With(kSpec61, {"--launch-grid", "abc"}));
  EXPECT_EQ(text.exit_code, 2);
  EXPECT_NE(text.err.find("--launch-grid"), std::string::npos) << text.err;
  const CliResult golden = RunCli({"plan", "--check-golden", "x.jsonl", "--launch-grid", "3"});
  EXPECT_EQ(golden.exit_code, 2);
  EXPECT_NE(golden.err.find("cannot be combined with --launch-grid"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Request files
// ---------------------------------------------------------------------------------------------

TEST(CliPlan, RequestFileGivesTheSamePlanAsFlags) {
  TempDir tmp;
  const std::string file = tmp.Write("spec61.json", kValidInput);
  const CliResult r = RunCli({"plan", "--request", file, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectSpec61Json(json::parse(r.out));
  EXPECT_EQ(r.out, RunCli(With(kSpec61, {"--json"})).out);
}

TEST(CliPlan, RequestFileMayBeAWholeGoldenRecord) {
  ASSERT_GOLDEN_PRESENT("aiter-v12-dev.jsonl.xz");
  TempDir tmp;
  const auto lines = GoldenLines("aiter-v12-dev.jsonl.xz", 1, &IsPlanRecord);
  ASSERT_EQ(lines.size(), 1u);
  const json rec = json::parse(lines[0]);
  const CliResult r = RunCli({"plan", "--json", "--request", tmp.Write("rec.json", lines[0])});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json got = json::parse(r.out);
  for (const char* key : {"work_indptr", "work_info", "reduce_indptr", "reduce_partial_map"})
    EXPECT_EQ(got.at(key), rec.at("output").at(key)) << key;
  // The corpus keys reduce_final_map by tile; --json lists the written tiles in order.
  json want = json::array();
  for (const auto& [tile, pair] : rec.at("output").at("reduce_final_map").items())
    want.push_back(json{{"tile", std::stoll(tile)}, {"pair", pair}});
  std::sort(want.begin(), want.end(),
            [](const json& a, const json& b) { return a.at("tile") < b.at("tile"); });
  EXPECT_EQ(got.at("reduce_final_map"), want);
}

// ---------------------------------------------------------------------------------------------
// --check-golden
// ---------------------------------------------------------------------------------------------

TEST(CliPlan, CheckGoldenPassesOnRealRecordsAndNamesACorruptedOne) {
  ASSERT_GOLDEN_PRESENT("aiter-v12-dev.jsonl.xz");
  TempDir tmp;
  const auto lines = GoldenLines("aiter-v12-dev.jsonl.xz", 2, &IsPlanRecord);
  ASSERT_EQ(lines.size(), 2u);
  const std::string good = tmp.Write("good.jsonl", lines[0] + "\n" + lines[1] + "\n");
  const CliResult ok = RunCli({"plan", "--check-golden", good});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_EQ(ok.out, "2/2 records match in " + good + "\n");
  EXPECT_EQ(ok.err, "");

  json bad = json::parse(lines[1]);
  const int64_t id = bad.at("id").get<int64_t>();
  bad["output"]["work_indptr"][1] = bad["output"]["work_indptr"][1].get<int64_t>() + 1;
  const std::string corrupted = tmp.Write("bad.jsonl", lines[0] + "\n" + bad.dump() + "\n");
  const CliResult fail = RunCli({"plan", "--check-golden", corrupted});
  EXPECT_EQ(fail.exit_code, 1) << fail.out << fail.err;
  EXPECT_NE(fail.out.find("id " + std::to_string(id) + ": work_indptr[1]: expected"),
            std::string::npos)
      << fail.out;
  EXPECT_NE(fail.out.find("1/2 records match in " + corrupted), std::string::npos) << fail.out;

  // Repeatable: one summary per file; the worst result decides the exit code.
  const CliResult both = RunCli({"plan", "--check-golden", good, "--check-golden", corrupted});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.out.find("2/2 records match in " + good), std::string::npos) << both.out;
  EXPECT_NE(both.out.find("1/2 records match in " + corrupted), std::string::npos) << both.out;
  const CliResult missing = RunCli(
      {"plan", "--check-golden", good, "--check-golden", (tmp.path() / "nope.jsonl").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err.rfind("mlasim plan: error: --check-golden: ", 0), 0u) << missing.err;
}

TEST(CliPlan, CheckGoldenAcceptsDecodeUpdateRecords) {
  ASSERT_GOLDEN_PRESENT("aiter-decode-update-dev.jsonl.xz");
  TempDir tmp;
  const auto lines = GoldenLines("aiter-decode-update-dev.jsonl.xz", 2, &AnyRecord);
  ASSERT_EQ(lines.size(), 2u);
  const std::string file = tmp.Write("update.jsonl", lines[0] + "\n" + lines[1] + "\n");
  const CliResult r = RunCli({"plan", "--check-golden", file});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "2/2 records match in " + file + "\n");
}

TEST(CliPlan, CheckGoldenRefusesUnreadableFiles) {
  TempDir tmp;
  const std::string empty = tmp.Write("empty.jsonl", "");
  const std::string not_json = tmp.Write("not_json.jsonl", "{\"id\": 1}\nnot json\n");
  for (const std::string& f :
       {(tmp.path() / "missing.jsonl").string(), empty, not_json, tmp.path().string()}) {
    const CliResult r = RunCli({"plan", "--check-golden", f});
    EXPECT_EQ(r.exit_code, 2) << f;
    EXPECT_EQ(r.err.rfind("mlasim plan: error: --check-golden: ", 0), 0u) << r.err;
  }
}

// The golden reader applies mlasim's limits (ref/limits.h) before planning a record: a 2 KB
// record asking for 330000 q rows per request planned 262,680,000 work_info rows before. A record
// that cannot be read is bad input (exit 2), not a mismatch (exit 1).
TEST(CliPlan, CheckGoldenAppliesTheLimitsAndRefusesMalformedRecords) {
  ASSERT_GOLDEN_PRESENT("aiter-v12-dev.jsonl.xz");
  TempDir tmp;
  const auto lines = GoldenLines("aiter-v12-dev.jsonl.xz", 1, &IsPlanRecord);
  ASSERT_EQ(lines.size(), 1u);
  json huge = json::parse(lines[0]);
  huge["input"]["max_seqlen_qo"] = 330000;
  const std::string file = tmp.Write("huge.jsonl", huge.dump() + "\n");
  const CliResult r = RunCli({"plan", "--check-golden", file});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(file + ":1: input.max_seqlen_qo: q tokens per request is 330000, above "
                              "mlasim's limit of 4096 (raise it with --limit qlen=N"),
            std::string::npos)
      << r.err;
  // With qlen raised the record is planned and compared: aiter planned it with another
  // max_seqlen_qo, so it no longer matches (exit 1, not 2).
  const CliResult raised = RunCli({"--limit", "qlen=400000", "plan", "--check-golden", file});
  EXPECT_EQ(raised.exit_code, 1) << raised.out << raised.err;
  EXPECT_NE(raised.out.find("0/1 records match in " + file), std::string::npos) << raised.out;

  json malformed = json::parse(lines[0]);
  malformed["output"].erase("work_info");
  const std::string bad = tmp.Write("malformed.jsonl", malformed.dump() + "\n");
  const CliResult m = RunCli({"plan", "--check-golden", bad});
  EXPECT_EQ(m.exit_code, 2) << m.out << m.err;
  EXPECT_NE(m.err.find(bad + ":1"), std::string::npos) << m.err;
  EXPECT_NE(m.err.find("malformed record"), std::string::npos) << m.err;
}

}  // namespace
}  // namespace mlasim::cli
