// The case-directory reader (tools/io/case_dir.h, npy_reader.h, case_plan.h): a valid case reads
// with the exact values written, and every error path has its own row or test, with the field
// and reason it must report (file, then the manifest or header field).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ref/planner.h"
#include "tests/cli/case_builders.h"
#include "tools/io/case_plan.h"
#include "tools/io/npy_reader.h"
#include "tools/io/plan_buffers.h"

namespace mlasim::io {
namespace {

using nlohmann::json;
using test::Bytes;
using test::CaseBuilder;
using test::NpyBytes;

// --- .npy headers ------------------------------------------------------------------------------

std::string Npy1(const std::string& dict) {  // version 1.0 file with exactly this dict
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

TEST(NpyReader, ParsesNumpysHeaderExactly) {
  const std::string f = NpyBytes("<i4", {3, 8}, std::string(96, '\0'));
  auto h = ParseNpyHeader(f, "w.npy");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->descr, "<i4");
  EXPECT_EQ(h->itemsize, 4);
  EXPECT_FALSE(h->fortran_order);
  EXPECT_EQ(h->shape, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(h->data_offset, 128);  // numpy pads the header to 64 bytes
  EXPECT_EQ(h->data_bytes, 96);
  EXPECT_TRUE(CheckNpyDataSize(*h, static_cast<int64_t>(f.size()), "w.npy").ok());
}

TEST(NpyReader, AcceptsAnyKeyOrderZeroDimsAndVersion2) {
  auto h = ParseNpyHeader(Npy1("{'shape': (), 'fortran_order': False, 'descr': '|u1'}\n"), "x");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_TRUE(h->shape.empty());
  EXPECT_EQ(h->data_bytes, 1);
  const std::string dict = "{\"descr\": \"<f2\", \"fortran_order\": True, \"shape\": (0, 5)}\n";
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  v2 += std::string(1, static_cast<char>(dict.size())) + std::string(3, '\0') + dict;
  auto h2 = ParseNpyHeader(v2, "x");
  ASSERT_TRUE(h2.ok()) << h2.status().ToString();
  EXPECT_EQ(h2->major, 2);
  EXPECT_EQ(h2->data_offset, 12 + static_cast<int64_t>(dict.size()));
  EXPECT_TRUE(h2->fortran_order);
  EXPECT_EQ(h2->data_bytes, 0);
}

struct NpyBad {
  const char* name;
  std::string bytes;
  const char* field;   // exact Status field
  const char* reason;  // fragment of the reason
};

std::vector<NpyBad> BadNpyHeaders() {
  const std::string ok_tail = "'fortran_order': False, 'shape': (2,)}\n";
  NpyLimits small;
  return {
      {"short", "\x93NUM", "x:magic", "shorter than the 8-byte"},
      {"magic", std::string("\x93NUMPX\x01\x00\x10\x00", 10), "x:magic", "no \\x93NUMPY magic"},
      {"version4", std::string("\x93NUMPY\x04\x00\x10\x00", 10), "x:version", "4.0 is not"},
      {"version11", std::string("\x93NUMPY\x01\x01\x10\x00", 10), "x:version", "1.1 is not"},
      {"len_cut", std::string("\x93NUMPY\x02\x00\x10", 9), "x:header_len", "ends in the preamble"},
      {"len_big", std::string("\x93NUMPY\x02\x00\x01\x00\x01\x00", 12), "x:header_len",
       "header of 65537 bytes is above mlasim's limit of 65536"},
      {"in_header", std::string("\x93NUMPY\x01\x00\x40\x00{'descr'", 17), "x:header",
       "ends inside the header"},
      {"no_newline", Npy1("{'descr': '<i4', " + ok_tail.substr(0, ok_tail.size() - 1)), "x:header",
       "does not end with a newline"},
      {"no_brace", Npy1("'descr': '<i4'}\n"), "x:header", "expected '{'"},
      {"key_unquoted", Npy1("{descr: '<i4'}\n"), "x:header.key", "expected a quoted string"},
      {"dup_key", Npy1("{'descr': '<i4', 'descr': '<i4', " + ok_tail), "x:header.descr",
       "key given twice"},
      {"no_colon", Npy1("{'descr' '<i4', " + ok_tail), "x:header.descr", "expected ':'"},
      {"unknown_key", Npy1("{'descr': '<i4', 'extra': 1, " + ok_tail), "x:header.extra",
       "unknown key"},
      {"descr_object", Npy1("{'descr': '|O', " + ok_tail), "x:header.descr",
       "not a plain type string"},
      {"descr_struct", Npy1("{'descr': [('a', '<i4')], " + ok_tail), "x:header.descr",
       "expected a quoted string"},
      {"descr_size", Npy1("{'descr': '<i3', " + ok_tail), "x:header.descr",
       "not a plain type string"},
      {"escape", Npy1("{'descr': '<i\\4', " + ok_tail), "x:header.descr", "escape"},
      {"unterminated", Npy1("{'descr': '<i4\n"), "x:header.descr", "unterminated string"},
      {"long_string", Npy1("{'descr': '" + std::string(70, 'a') + "', " + ok_tail),
       "x:header.descr", "longer than 64"},
      {"fortran_int", Npy1("{'descr': '<i4', 'fortran_order': 0, 'shape': (2,)}\n"),
       "x:header.fortran_order", "expected True or False"},
      {"shape_list", Npy1("{'descr': '<i4', 'fortran_order': False, 'shape': [2]}\n"),
       "x:header.shape", "expected a tuple"},
      {"shape_int", Npy1("{'descr': '<i4', 'fortran_order': False, 'shape': (2)}\n"),
       "x:header.shape", "write '(n,)'"},
      {"shape_negative", Npy1("{'descr': '<i4', 'fortran_order': False, 'shape': (-2,)}\n"),
       "x:header.shape", "non-negative integer"},
      {"shape_sep", Npy1("{'descr': '<i4', 'fortran_order': False, 'shape': (2 3)}\n"),
       "x:header.shape", "expected ',' or ')'"},
      {"shape_ndim",
       Npy1("{'descr': '<i4', 'fortran_order': False, 'shape': "
            "(1,1,1,1,1,1,1,1,1)}\n"),
       "x:header.shape", "more than 8 dimensions"},
      {"shape_dim", Npy1("{'descr': '<i4', 'fortran_order': False, 'shape': (1099511627777,)}\n"),
       "x:header.shape", "above mlasim's limit of 1099511627776"},
      {"shape_bytes",
       Npy1("{'descr': '<i8', 'fortran_order': False, 'shape': "
            "(1099511627776, 1099511627776)}\n"),
       "x:header.shape", "above mlasim's limit of 2^62 bytes"},
      {"after_value", Npy1("{'descr': '<i4' 'fortran_order': False, 'shape': (2,)}\n"),
       "x:header.descr", "expected ',' or '}'"},
      {"after_brace", Npy1("{'descr': '<i4', " + ok_tail.substr(0, ok_tail.size() - 1) + " x\n"),
       "x:header", "text after the closing"},
      {"missing_shape", Npy1("{'descr': '<i4', 'fortran_order': False}\n"), "x:header.shape",
       "required key is missing"},
      {"missing_descr", Npy1("{'fortran_order': False, 'shape': (2,)}\n"), "x:header.descr",
       "required key is missing"},
      {"missing_fortran", Npy1("{'descr': '<i4', 'shape': (2,)}\n"), "x:header.fortran_order",
       "required key is missing"},
  };
}

TEST(NpyReader, EveryHeaderErrorNamesItsField) {
  for (const NpyBad& c : BadNpyHeaders()) {
    auto h = ParseNpyHeader(c.bytes, "x");
    ASSERT_FALSE(h.ok()) << c.name;
    EXPECT_EQ(h.status().field(), c.field) << c.name << ": " << h.status().ToString();
    EXPECT_NE(h.status().message().find(c.reason), std::string::npos)
        << c.name << ": " << h.status().ToString();
  }
}

TEST(NpyReader, LimitsAreInclusive) {
  // 8 dimensions, an extent of exactly 2^40 and a 65536-byte header are accepted; one more of any
  // is refused (EveryHeaderErrorNamesItsField).
  auto h = ParseNpyHeader(
      Npy1("{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776,1,1,1,1,1,1,1)}\n"),
      "x");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->shape.size(), 8u);
  EXPECT_EQ(h->data_bytes, int64_t{1} << 40);
  int64_t len = 0;
  auto pre = ParseNpyPreamble(std::string("\x93NUMPY\x02\x00\x00\x00\x01\x00", 12), "x", {}, &len);
  ASSERT_TRUE(pre.ok());
  EXPECT_EQ(*pre, 12);
  EXPECT_EQ(len, 65536);
}

TEST(NpyReader, DataSizeMustMatchTheHeaderExactly) {
  const std::string f = NpyBytes("<i4", {4}, std::string(16, '\0'));
  auto h = ParseNpyHeader(f, "k.npy");
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->data_offset, 128);
  const Status cut = CheckNpyDataSize(*h, 128 + 15, "k.npy");
  EXPECT_EQ(cut.field(), "k.npy:data");
  EXPECT_EQ(cut.message(),
            "truncated: the header declares 16 data bytes (<i4 (4,)) but the file "
            "holds 15");
  const Status extra = CheckNpyDataSize(*h, 128 + 20, "k.npy");
  EXPECT_EQ(extra.message(), "4 bytes after the 16 data bytes the header declares");
  EXPECT_TRUE(CheckNpyDataSize(*h, 144, "k.npy").ok());
}

// --- manifests ---------------------------------------------------------------------------------

CaseBuilder ValidCase() {
  CaseBuilder b;
  b.AddInt32("kv_indptr", {0, 300, 340, 1040});
  b.Add("q", "bfloat16", {3, 16, 4}, std::string(3 * 16 * 4 * 2, '\0'), 0x7f2000000000);
  return b;
}

TEST(CaseManifest, AValidCaseReadsWithItsValues) {
  const MemoryCaseFiles files = ValidCase().Files();
  auto m = OpenCase(files);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->call, "mla_decode_fwd");
  ASSERT_EQ(m->tensors.size(), 2u);
  const CaseTensor* q = m->Find("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, "bfloat16");
  EXPECT_EQ(q->descr, "<u2");
  EXPECT_EQ(q->strides, (std::vector<int64_t>{64, 4, 1}));
  EXPECT_EQ(q->nbytes, 384);
  EXPECT_EQ(q->data_ptr, 0x7f2000000000u);
  EXPECT_EQ(q->span_end, 384);
  auto v = ReadInt32Tensor(files, *m->Find("kv_indptr"), {1}, "kv_indptr");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, (std::vector<int32_t>{0, 300, 340, 1040}));
}

// A tensor may end exactly at 2^64 (its last byte at 2^64 - 1) or start at address 0.
TEST(CaseManifest, ATensorMayReachEitherEndOfTheAddressSpace) {
  for (const auto& [ptr, strides] : std::vector<std::pair<const char*, json>>{
           {"0xfffffffffffffe80", {64, 4, 1}}, {"0x100", {-64, 4, 1}}}) {
    CaseBuilder b = ValidCase();
    b.manifest["tensors"]["q"]["data_ptr"] = ptr;
    b.manifest["tensors"]["q"]["strides"] = strides;
    auto m = OpenCase(b.Files());
    EXPECT_TRUE(m.ok()) << ptr << ": " << m.status().ToString();
  }
}

struct ManifestBad {
  const char* name;
  std::function<void(json&)> mutate;
  const char* field;   // after "manifest.json"
  const char* reason;  // fragment
};

std::vector<ManifestBad> BadManifests() {
  auto q = [](json& m) -> json& { return m["tensors"]["q"]; };
  return {
      {"not_object", [](json& m) { m = json::array(); }, "", "must hold a JSON object"},
      {"unknown_top", [](json& m) { m["extra"] = 1; }, ":extra", "unknown key"},
      {"no_format", [](json& m) { m.erase("format"); }, ":format", "required key is missing"},
      {"format", [](json& m) { m["format"] = "npz"; }, ":format", "expected 'mlasim-case'"},
      {"format_type", [](json& m) { m["format"] = 1; }, ":format", "must be a string"},
      {"no_schema", [](json& m) { m.erase("schema_version"); }, ":schema_version", "missing"},
      {"schema_type", [](json& m) { m["schema_version"] = "1"; }, ":schema_version",
       "must be an integer"},
      {"schema_new", [](json& m) { m["schema_version"] = 2; }, ":schema_version",
       "this mlasim reads version 1"},
      {"schema_zero", [](json& m) { m["schema_version"] = 0; }, ":schema_version", "outside 1.."},
      {"no_call", [](json& m) { m.erase("call"); }, ":call", "required key is missing"},
      {"empty_call", [](json& m) { m["call"] = ""; }, ":call", "printable characters"},
      {"ctrl_call", [](json& m) { m["call"] = "a\nb"; }, ":call", "printable characters"},
      {"no_versions", [](json& m) { m.erase("versions"); }, ":versions", "missing"},
      {"versions_type", [](json& m) { m["versions"] = "1"; }, ":versions", "must be an object"},
      {"version_value", [](json& m) { m["versions"]["torch"] = 2; }, ":versions.torch",
       "must be a string"},
      {"no_mlasim", [](json& m) { m["versions"].erase("mlasim"); }, ":versions.mlasim", "missing"},
      {"many_versions",
       [](json& m) {
         for (int i = 0; i < 40; ++i) m["versions"]["v" + std::to_string(i)] = "1";
       },
       ":versions", "more than 32"},
      {"no_config", [](json& m) { m.erase("config"); }, ":config", "missing"},
      {"config_type", [](json& m) { m["config"] = json::array(); }, ":config", "must be an object"},
      {"no_tensors", [](json& m) { m.erase("tensors"); }, ":tensors", "missing"},
      {"tensors_type", [](json& m) { m["tensors"] = json::array(); }, ":tensors",
       "must be an object"},
      {"tensor_name", [](json& m) { m["tensors"]["1q"] = m["tensors"]["q"]; }, ":tensors.1q",
       "must be an identifier"},
      {"entry_type", [&](json& m) { q(m) = 3; }, ":tensors.q", "must be an object"},
      {"entry_key", [&](json& m) { q(m)["bytes"] = 3; }, ":tensors.q.bytes", "unknown key"},
      {"no_file", [&](json& m) { q(m).erase("file"); }, ":tensors.q.file", "missing"},
      {"no_dtype", [&](json& m) { q(m).erase("dtype"); }, ":tensors.q.dtype", "missing"},
      {"no_descr", [&](json& m) { q(m).erase("descr"); }, ":tensors.q.descr", "missing"},
      {"no_shape", [&](json& m) { q(m).erase("shape"); }, ":tensors.q.shape", "missing"},
      {"no_strides", [&](json& m) { q(m).erase("strides"); }, ":tensors.q.strides", "missing"},
      {"no_nbytes", [&](json& m) { q(m).erase("nbytes"); }, ":tensors.q.nbytes", "missing"},
      {"no_data_ptr", [&](json& m) { q(m).erase("data_ptr"); }, ":tensors.q.data_ptr", "missing"},
      {"no_device", [&](json& m) { q(m).erase("device"); }, ":tensors.q.device", "missing"},
      {"file_dotdot", [&](json& m) { q(m)["file"] = "../q.npy"; }, ":tensors.q.file",
       "plain file name"},
      {"file_dir", [&](json& m) { q(m)["file"] = "a/q.npy"; }, ":tensors.q.file",
       "plain file name"},
      {"file_hidden", [&](json& m) { q(m)["file"] = ".q.npy"; }, ":tensors.q.file",
       "plain file name"},
      {"file_ext", [&](json& m) { q(m)["file"] = "q.bin"; }, ":tensors.q.file", "plain file name"},
      {"file_shared", [&](json& m) { q(m)["file"] = "kv_indptr.npy"; }, ":tensors.q.file",
       "also another tensor's file"},
      {"dtype_unknown", [&](json& m) { q(m)["dtype"] = "complex64"; }, ":tensors.q.dtype",
       "unknown dtype 'complex64'"},
      {"descr_mismatch", [&](json& m) { q(m)["descr"] = "<f2"; }, ":tensors.q.descr",
       "a bfloat16 tensor is stored as '<u2'"},
      {"shape_type", [&](json& m) { q(m)["shape"] = 3; }, ":tensors.q.shape", "must be an array"},
      {"shape_entry", [&](json& m) { q(m)["shape"][1] = 1.5; }, ":tensors.q.shape[1]",
       "must be an integer"},
      {"shape_negative", [&](json& m) { q(m)["shape"][0] = -3; }, ":tensors.q.shape[0]",
       "outside 0.."},
      {"shape_ndim", [&](json& m) { q(m)["shape"] = std::vector<int>(9, 1); }, ":tensors.q.shape",
       "above mlasim's limit of 8"},
      {"strides_len",
       [&](json& m) {
         q(m)["strides"] = {4, 1};
       },
       ":tensors.q.strides", "has 2 entries, shape has 3"},
      {"strides_range", [&](json& m) { q(m)["strides"][0] = int64_t{1} << 41; },
       ":tensors.q.strides[0]", "outside"},
      {"span",
       [&](json& m) {
         q(m)["shape"] = {1 << 21, 16, 4};
         q(m)["nbytes"] = int64_t{1} << 28;
         q(m)["strides"] = {int64_t{1} << 40, 4, 1};
       },
       ":tensors.q.strides", "spans more than 2^60 elements"},
      {"nbytes", [&](json& m) { q(m)["nbytes"] = 100; }, ":tensors.q.nbytes",
       "is 100 but shape (3, 16, 4) of bfloat16 (2 bytes) holds 384"},
      {"data_ptr_upper", [&](json& m) { q(m)["data_ptr"] = "0x7F00"; }, ":tensors.q.data_ptr",
       "lowercase 0x hex"},
      {"data_ptr_long", [&](json& m) { q(m)["data_ptr"] = "0x10000000000000000"; },
       ":tensors.q.data_ptr", "'0x10000000000000000' is above 64 bits (17 significant hex digits"},
      {"data_ptr_int", [&](json& m) { q(m)["data_ptr"] = 4096; }, ":tensors.q.data_ptr",
       "must be a string"},
      // q's 384 bytes end at 2^64 from 0xfffffffffffffe80 (accepted: CaseReader.*Extent*); one
      // byte later they pass it.
      {"data_ptr_wraps", [&](json& m) { q(m)["data_ptr"] = "0xfffffffffffffe81"; },
       ":tensors.q.data_ptr", "data_ptr + the tensor's 384 bytes passes 2^64"},
      {"data_ptr_below_0",
       [&](json& m) {
         q(m)["strides"] = {-64, 4, 1};
         q(m)["data_ptr"] = "0xff";
       },
       ":tensors.q.data_ptr", "the tensor's lowest byte (data_ptr - 256) is below address 0"},
  };
}

TEST(CaseManifest, EveryManifestErrorNamesItsField) {
  for (const ManifestBad& c : BadManifests()) {
    CaseBuilder b = ValidCase();
    c.mutate(b.manifest);
    auto m = OpenCase(b.Files());
    ASSERT_FALSE(m.ok()) << c.name;
    EXPECT_EQ(m.status().field(), std::string("manifest.json") + c.field)
        << c.name << ": " << m.status().ToString();
    EXPECT_NE(m.status().message().find(c.reason), std::string::npos)
        << c.name << ": " << m.status().ToString();
  }
}

TEST(CaseManifest, MalformedJsonAndTooManyTensorsAndTooLargeAManifest) {
  MemoryCaseFiles f = ValidCase().Files();
  f.files["manifest.json"] = "{\"format\": ";
  EXPECT_EQ(OpenCase(f).status().field(), "manifest.json");
  f.files["manifest.json"] = "{\"a\": 1, \"a\": 2}";
  EXPECT_NE(OpenCase(f).status().message().find("duplicate"), std::string::npos);
  CaseLimits two;
  two.max_tensors = 2;
  EXPECT_TRUE(OpenCase(ValidCase().Files(), two).ok());
  CaseLimits few;
  few.max_tensors = 1;
  auto m = OpenCase(ValidCase().Files(), few);
  EXPECT_EQ(m.status().field(), "manifest.json:tensors");
  EXPECT_EQ(m.status().message(), "holds 2 tensors, above mlasim's limit of 1");
  CaseLimits tiny;
  tiny.max_manifest_bytes = 100;
  auto big = OpenCase(ValidCase().Files(), tiny);
  EXPECT_EQ(big.status().field(), "manifest.json");
  EXPECT_NE(big.status().message().find("above mlasim's limit of 100"), std::string::npos);
  MemoryCaseFiles none;
  EXPECT_EQ(OpenCase(none).status().ToString(), "manifest.json: no such file");
}

// --- .npy files against the manifest -----------------------------------------------------------

TEST(CaseFilesCheck, EachNpyMustMatchItsManifestEntry) {
  struct Row {
    const char* name;
    std::function<void(CaseBuilder&)> mutate;
    std::string error;
  };
  const std::vector<Row> rows = {
      {"missing", [](CaseBuilder& b) { b.files.erase("q.npy"); }, "q.npy: no such file"},
      {"descr",
       [](CaseBuilder& b) {
         b.files["q.npy"] = NpyBytes("<f2", {3, 16, 4}, std::string(384, 0));
       },
       "q.npy:header.descr: is '<f2' but manifest.json:tensors.q.descr is '<u2' (dtype "
       "bfloat16)"},
      {"fortran",
       [](CaseBuilder& b) {
         b.files["q.npy"] = NpyBytes("<u2", {3, 16, 4}, std::string(384, 0), true);
       },
       "q.npy:header.fortran_order: is True; case files hold C-order data (mlasim.capture writes "
       "them so)"},
      {"shape",
       [](CaseBuilder& b) {
         b.files["q.npy"] = NpyBytes("<u2", {3, 16, 2}, std::string(192, 0));
       },
       "q.npy:header.shape: is (3, 16, 2) but manifest.json:tensors.q.shape is (3, 16, 4)"},
      {"truncated", [](CaseBuilder& b) { b.files["q.npy"].resize(b.files["q.npy"].size() - 1); },
       "q.npy:data: truncated: the header declares 384 data bytes (<u2 (3, 16, 4)) but the file "
       "holds 383"},
      {"padded", [](CaseBuilder& b) { b.files["q.npy"] += "xx"; },
       "q.npy:data: 2 bytes after the 384 data bytes the header declares"},
      {"header_cut", [](CaseBuilder& b) { b.files["q.npy"].resize(40); },
       "q.npy:header: truncated: the file ends inside the header (40 of 128 bytes)"},
      {"not_npy", [](CaseBuilder& b) { b.files["q.npy"] = "PK\x03\x04zipfile"; },
       "q.npy:magic: not a .npy file (no \\x93NUMPY magic)"},
  };
  for (const Row& r : rows) {
    CaseBuilder b = ValidCase();
    r.mutate(b);
    auto m = OpenCase(b.Files());
    ASSERT_FALSE(m.ok()) << r.name;
    EXPECT_EQ(m.status().ToString(), r.error) << r.name;
  }
}

TEST(CaseFilesCheck, ReadingDataIsBoundedAndTyped) {
  const MemoryCaseFiles files = ValidCase().Files();
  auto m = OpenCase(files);
  ASSERT_TRUE(m.ok());
  CaseLimits small;
  small.max_load_bytes = 383;
  EXPECT_EQ(ReadTensorData(files, *m->Find("q"), small).status().ToString(),
            "manifest.json:tensors.q.nbytes: 384 bytes is above mlasim's limit of 383 for a "
            "tensor whose values it reads");
  small.max_load_bytes = 384;
  EXPECT_TRUE(ReadTensorData(files, *m->Find("q"), small).ok());
  EXPECT_EQ(ReadInt32Tensor(files, *m->Find("q"), {1}, "get_mla_metadata_v1's kv_indptr")
                .status()
                .ToString(),
            "manifest.json:tensors.q.dtype: is bfloat16; get_mla_metadata_v1's kv_indptr is int32");
  CaseBuilder b;
  b.AddInt32("kv_indptr", {0, 1, 2, 3}, {2, 2});
  const MemoryCaseFiles f2 = b.Files();
  auto m2 = OpenCase(f2);
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(ReadInt32Tensor(f2, m2->tensors[0], {1}, "kv_indptr").status().ToString(),
            "manifest.json:tensors.kv_indptr.shape: (2, 2) has 2 dimensions; kv_indptr has 1");
}

class DiskCase : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("mlasim_case_reader_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(DiskCase, DirectoryAndFileErrorsSayWhich) {
  DiskCaseFiles missing(dir_.string());
  EXPECT_EQ(missing.CheckDirectory().ToString(), dir_.string() + ": no such case directory");
  std::filesystem::create_directories(dir_.parent_path());
  { std::ofstream(dir_.string()) << "x"; }
  EXPECT_EQ(missing.CheckDirectory().ToString(),
            dir_.string() +
                ": is not a directory (give the case directory that holds "
                "manifest.json)");
  std::filesystem::remove(dir_);
  ValidCase().WriteTo(dir_);
  DiskCaseFiles files(dir_.string());
  EXPECT_TRUE(files.CheckDirectory().ok());
  auto m = OpenCase(files);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->tensors.size(), 2u);
  std::filesystem::remove(dir_ / "q.npy");
  std::filesystem::create_directory(dir_ / "q.npy");
  EXPECT_EQ(OpenCase(files).status().ToString(),
            (dir_ / "q.npy").string() + ": is a directory, not a file");
  std::filesystem::remove(dir_ / "q.npy");
  EXPECT_EQ(OpenCase(files).status().ToString(), (dir_ / "q.npy").string() + ": no such file");
  std::filesystem::remove(dir_ / "manifest.json");
  EXPECT_EQ(OpenCase(files).status().ToString(),
            (dir_ / "manifest.json").string() + ": no such file");
}

// --- the planner's part of a case --------------------------------------------------------------

ref::PlanRequest WorkedExample() {  // aiter-mla-metadata.md §6.1
  ref::PlanRequest r;
  r.cu_count = 8;
  r.kv_indptr = {0, 300, 340, 1040};
  r.qo_indptr = {0, 1, 2, 3};
  r.kv_last_page_lens = {1, 1, 1};
  return r;
}

CaseBuilder PlannedCase() {
  const ref::PlanRequest r = WorkedExample();
  CaseBuilder b;
  b.AddRequest(r);
  b.AddPlan(*ref::PlanMlaMetadata(r));
  return b;
}

TEST(CasePlanner, ReadsTheRequestAndTheBuffers) {
  const MemoryCaseFiles files = PlannedCase().Files();
  auto m = OpenCase(files);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto p = ReadCasePlanner(files, *m);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->request.has_value());
  EXPECT_EQ(p->request->kv_indptr, (std::vector<int32_t>{0, 300, 340, 1040}));
  EXPECT_EQ(p->request->cu_count, 8);
  ASSERT_TRUE(p->buffers.has_value());
  EXPECT_EQ((*p->buffers)[0], (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 6, 6}));
  EXPECT_EQ(p->views().work_info.size, 8 * 10);  // info_v1: (B + clusters - 1) rows
  ASSERT_TRUE(p->work_metadata_ptrs.has_value());
  EXPECT_EQ(*p->work_metadata_ptrs, (std::vector<uint64_t>{0, 0}));
}

TEST(CasePlanner, MissingPartsAreReportedNotGuessed) {
  CaseBuilder b = PlannedCase();
  b.manifest["config"].erase("planner");
  b.manifest["tensors"].erase("reduce_indptr");
  const MemoryCaseFiles files = b.Files();
  auto m = OpenCase(files);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto p = ReadCasePlanner(files, *m);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->request.has_value());
  EXPECT_EQ(p->missing_request, "config.planner (get_mla_metadata_v1's scalar arguments)");
  EXPECT_FALSE(p->buffers.has_value());
  EXPECT_EQ(p->missing_buffers, "reduce_indptr");
  CaseBuilder c = PlannedCase();
  c.manifest["tensors"].erase("kv_indptr");
  const MemoryCaseFiles f2 = c.Files();
  auto p2 = ReadCasePlanner(f2, *OpenCase(f2));
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->missing_request, "the tensor kv_indptr (alias seqlens_kv_indptr)");
}

TEST(CasePlanner, EveryPlannerErrorNamesItsField) {
  struct Row {
    const char* name;
    std::function<void(CaseBuilder&)> mutate;
    std::string error;
  };
  const std::vector<Row> rows = {
      {"planner_type", [](CaseBuilder& b) { b.manifest["config"]["planner"] = 3; },
       "manifest.json:config.planner: must be an object of get_mla_metadata_v1's scalar "
       "arguments (mlasim.planner_config)"},
      {"array_in_config",
       [](CaseBuilder& b) {
         b.manifest["config"]["planner"]["kv_indptr"] = {0, 1};
       },
       "manifest.json:config.planner.kv_indptr: comes from the captured tensor kv_indptr, not "
       "from config.planner"},
      {"cu_count", [](CaseBuilder& b) { b.manifest["config"]["planner"]["cu_count"] = 0; },
       "manifest.json:config.planner.cu_count: must be >= 1"},
      {"unknown_key", [](CaseBuilder& b) { b.manifest["config"]["planner"]["heads"] = 16; },
       "manifest.json:config.planner.heads: unknown key"},
      {"missing_key", [](CaseBuilder& b) { b.manifest["config"]["planner"].erase("target"); },
       "manifest.json:config.planner.target: required key is missing"},
      {"qo_count",
       [](CaseBuilder& b) {
         b.AddInt32("qo_indptr", {0, 1, 2});
       },
       "manifest.json:tensors.qo_indptr: needs 4 entries (kv_indptr has that many)"},
      {"alias_twice",
       [](CaseBuilder& b) {
         b.AddInt32("seqlens_kv_indptr", {0, 1});
       },
       "manifest.json:tensors.seqlens_kv_indptr: names the same buffer as tensors.kv_indptr; "
       "capture one"},
      {"kv_dtype", [](CaseBuilder& b) { b.Add("kv_indptr", "int64", {4}, std::string(32, '\0')); },
       "manifest.json:tensors.kv_indptr.dtype: is int64; get_mla_metadata_v1's kv_indptr is "
       "int32"},
      {"work_info_width",
       [](CaseBuilder& b) {
         b.AddInt32("work_info", std::vector<int32_t>(14, 0), {2, 7});
       },
       "manifest.json:tensors.work_info.shape: (2, 7): aiter's work_info has rows of 8 int32"},
      {"work_info_rank",
       [](CaseBuilder& b) { b.AddInt32("work_info", std::vector<int32_t>(16, 0)); },
       "manifest.json:tensors.work_info.shape: (16,) has 1 dimensions; aiter's work_info has 2"},
      {"ptrs_dtype",
       [](CaseBuilder& b) {
         b.AddInt32("work_metadata_ptrs", {0, 0});
       },
       "manifest.json:tensors.work_metadata_ptrs.dtype: is int32; work_metadata_ptrs holds two "
       "uint64 pointers (int64 where torch has no uint64)"},
      {"ptrs_shape",
       [](CaseBuilder& b) { b.Add("work_metadata_ptrs", "uint64", {3}, std::string(24, '\0')); },
       "manifest.json:tensors.work_metadata_ptrs.shape: (3,); work_metadata_ptrs has shape (2,)"},
  };
  for (const Row& r : rows) {
    CaseBuilder b = PlannedCase();
    r.mutate(b);
    const MemoryCaseFiles files = b.Files();
    auto m = OpenCase(files);
    ASSERT_TRUE(m.ok()) << r.name << ": " << m.status().ToString();
    auto p = ReadCasePlanner(files, *m);
    ASSERT_FALSE(p.ok()) << r.name;
    EXPECT_EQ(p.status().ToString(), r.error) << r.name;
  }
}

TEST(CasePlanner, AnIndptrAboveTheRequestLimitIsRefusedBeforeItIsRead) {
  CaseBuilder b = PlannedCase();
  b.AddInt32("kv_indptr", std::vector<int32_t>((1 << 20) + 2, 0));
  const MemoryCaseFiles files = b.Files();
  auto p = ReadCasePlanner(files, *OpenCase(files));
  EXPECT_EQ(p.status().ToString(),
            "manifest.json:tensors.kv_indptr.shape: holds 1048578 entries, above mlasim's limit "
            "of 1048577 (requests + 1; raise it with --limit requests=N)");
}

TEST(CaseLayoutTest, OneAllocationPerTensorWithRowsHeadsAndColumns) {
  CaseBuilder b;
  b.Add("o", "bfloat16", {4, 16, 512}, std::string(4 * 16 * 512 * 2, '\0'), 0x7f3000000000);
  b.AddInt32("kv_indptr", {0, 5}, {}, 0x7f3000100000);
  b.AddInt32("empty", {}, {0}, 0x7f3000200000);
  const MemoryCaseFiles files = b.Files();
  auto m = OpenCase(files);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const json layout = CaseLayout(*m);
  EXPECT_EQ(
      layout.dump(),
      R"({"allocations":[{"base":"0x7f3000100000","bytes":8,"name":"kv_indptr","row_bytes":4},)"
      R"({"base":"0x7f3000000000","bytes":65536,"cols":512,"elem_bytes":2,"heads":16,)"
      R"("name":"o","row_bytes":16384}],"call_name":"mla_decode_fwd"})");
}

// --- plan buffers held by someone else (tools/io/plan_buffers.h) --------------------------------

namespace plan_buffers_test {

PlanBufferViews ViewsOf(const ref::Plan& p) {
  const auto v = [](const ref::Int32Buffer& b) { return Int32View{b.data.data(), b.size()}; };
  return {v(p.work_indptr), v(p.work_info), v(p.reduce_indptr), v(p.reduce_final_map),
          v(p.reduce_partial_map)};
}

TEST(PlanBuffers, AnEngineCopyOfAPlanIsThePlanWithItsWriteStateFromThePoison) {
  const ref::PlanRequest r = WorkedExample();
  const ref::Plan planned = *ref::PlanMlaMetadata(r);
  auto p = PlanFromBuffers(r, ViewsOf(planned), kDefaultUnwrittenValue);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->derived.num_works, 6);
  EXPECT_EQ(p->derived.num_clusters, 8);
  EXPECT_EQ(p->work_info.cells, planned.work_info.cells);  // unwritten rows are the poison ones
  EXPECT_EQ(p->reduce_partial_map.WrittenPrefix(), 5);
  auto all = PlanFromBuffers(r, ViewsOf(planned), std::nullopt);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->reduce_partial_map.WrittenPrefix(), 10);
  const ref::MetadataSizes s = SizesOf(*p);
  EXPECT_EQ(s.work_indptr, 9);
  EXPECT_EQ(s.work_info_rows, 10);
  EXPECT_EQ(s.reduce_final_map_rows, 3);
  EXPECT_EQ(s.max_splits, 8);
  const PlanDiff same = DiffPlans(*p, planned);
  EXPECT_TRUE(same.identical());
  EXPECT_EQ(same.cells_compared, 70);
}

TEST(PlanBuffers, EachBufferErrorNamesTheBuffer) {
  const ref::PlanRequest r = WorkedExample();
  const ref::Plan planned = *ref::PlanMlaMetadata(r);
  PlanBufferViews v = ViewsOf(planned);
  v.work_info.size = 79;
  EXPECT_EQ(PlanFromBuffers(r, v, std::nullopt).status().ToString(),
            "work_info: holds 79 int32, not a multiple of its row width 8");
  v = ViewsOf(planned);
  v.reduce_final_map.size = 5;
  EXPECT_EQ(PlanFromBuffers(r, v, std::nullopt).status().ToString(),
            "reduce_final_map: holds 5 int32, not a multiple of its row width 2");
  v = ViewsOf(planned);
  v.reduce_indptr.data = nullptr;
  EXPECT_EQ(PlanFromBuffers(r, v, std::nullopt).status().ToString(), "reduce_indptr: has no data");
  v = ViewsOf(planned);
  v.reduce_partial_map.size = int64_t{INT32_MAX} + 1;
  EXPECT_EQ(PlanFromBuffers(r, v, std::nullopt).status().ToString(),
            "reduce_partial_map: holds 2147483648 elements; aiter's buffers are indexed in int32");
  ref::PlanRequest bad = r;
  bad.heads_per_head_k = 20;
  EXPECT_EQ(PlanFromBuffers(bad, ViewsOf(planned), std::nullopt).status().field(),
            "heads_per_head_k");
  bad = r;
  bad.kv_indptr[2] = 1;
  EXPECT_EQ(PlanFromBuffers(bad, ViewsOf(planned), std::nullopt).status().field(), "kv_indptr[2]");
}

TEST(PlanBuffers, TheDiffNamesAnUnwrittenCapturedCellAndStoresPastTheEnd) {
  const ref::PlanRequest r = WorkedExample();
  ref::Plan planned = *ref::PlanMlaMetadata(r);
  planned.reduce_final_map.data[4] = ref::Plan::kPoison;  // tile 2's pair, never written
  auto captured = PlanFromBuffers(r, ViewsOf(planned), kDefaultUnwrittenValue);
  ASSERT_TRUE(captured.ok());
  const ref::Plan replanned = *ref::PlanMlaMetadataInto(r, SizesOf(*captured));
  const PlanDiff d = DiffPlans(*captured, replanned);
  ASSERT_TRUE(d.first.has_value());
  EXPECT_EQ(d.first->text,
            "reduce_final_map[2][0] (element 4): captured unwritten (-1515870811), re-planned 2");
  EXPECT_TRUE(d.first->captured_unwritten);
  EXPECT_EQ(d.cells_differing, 1);
  ref::MetadataSizes small = SizesOf(*captured);
  small.work_info_rows = 4;
  const ref::Plan cut = *ref::PlanMlaMetadataInto(r, small);
  const PlanDiff past = DiffPlans(*captured, cut);
  ASSERT_EQ(past.stores_past_end.size(), 1u);
  EXPECT_EQ(past.stores_past_end[0].buffer, "work_info");
  EXPECT_EQ(past.stores_past_end[0].stores, 16);  // works 4 and 5
  EXPECT_EQ(past.stores_past_end[0].first_index, 32);
  EXPECT_FALSE(past.identical());
}

}  // namespace plan_buffers_test

TEST_F(DiskCase, AFifoIsNotARegularFile) {
  std::filesystem::create_directories(dir_);
  const std::string fifo = (dir_ / "manifest.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  DiskCaseFiles files(dir_.string());
  EXPECT_EQ(OpenCase(files).status().ToString(), fifo + ": is not a regular file");
}

}  // namespace
}  // namespace mlasim::io
