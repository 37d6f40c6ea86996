// Helpers for tests of case directories (tools/io/case_dir.h, `mlasim check`): .npy bytes as
// numpy writes them, and a case (manifest + files) built in memory, optionally written to disk.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ref/metadata.h"
#include "tools/io/case_dir.h"
#include "tools/io/request_json.h"

namespace mlasim::io::test {

// A version 1.0 .npy file as numpy.save writes it: header padded with spaces to a multiple of
// 64 bytes, ending in a newline.
inline std::string NpyBytes(const std::string& descr, const std::vector<int64_t>& shape,
                            const std::string& data, bool fortran = false) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + NpyShapeString(shape) + ", }";
  size_t total = 10 + dict.size() + 1;
  const size_t padded = (total + 63) / 64 * 64;
  dict += std::string(padded - total, ' ') + "\n";
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// A case in memory: add tensors, then mutate manifest JSON or file bytes to make bad cases.
class CaseBuilder {
 public:
  explicit CaseBuilder(std::string call = "mla_decode_fwd") {
    manifest = {{"format", "mlasim-case"},
                {"schema_version", 1},
                {"call", call},
                {"versions", {{"mlasim", "0.1.0"}, {"numpy", "1.24.2"}}},
                {"config", nlohmann::json::object()},
                {"tensors", nlohmann::json::object()}};
  }

  // A C-contiguous tensor of `dtype` (a CaseDTypes() name) at `data_ptr`.
  CaseBuilder& Add(const std::string& name, const std::string& dtype,
                   const std::vector<int64_t>& shape, const std::string& data,
                   uint64_t data_ptr = 0x7f0000000000, const std::string& device = "cuda:0") {
    const CaseDType* dt = FindCaseDType(dtype);
    std::vector<int64_t> strides(shape.size(), 1);
    for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
      strides[i] = strides[i + 1] * shape[i + 1];
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    manifest["tensors"][name] = {{"file", name + ".npy"},
                                 {"dtype", dtype},
                                 {"descr", dt->descr},
                                 {"shape", shape},
                                 {"strides", strides},
                                 {"nbytes", elements * dt->itemsize},
                                 {"data_ptr", HexAddress(data_ptr)},
                                 {"device", device}};
    files[name + ".npy"] = NpyBytes(dt->descr, shape, data);
    return *this;
  }
  CaseBuilder& AddInt32(const std::string& name, const std::vector<int32_t>& v,
                        std::vector<int64_t> shape = {}, uint64_t data_ptr = 0x7f0000000000) {
    if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
    return Add(name, "int32", shape, Bytes(v), data_ptr);
  }

  // The request's arrays as tensors and its scalars as config.planner.
  CaseBuilder& AddRequest(const ref::PlanRequest& r);
  // The five plan buffers (and work_metadata_ptrs = {0, 0}) as tensors.
  CaseBuilder& AddPlan(const ref::Plan& plan, uint64_t base = 0x7f1000000000);

  MemoryCaseFiles Files() const {
    MemoryCaseFiles f;
    f.files = files;
    f.files["manifest.json"] = manifest.dump(2);
    return f;
  }
  void WriteTo(const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    for (const auto& [name, bytes] : Files().files)
      std::ofstream(dir / name, std::ios::binary) << bytes;
  }

  nlohmann::json manifest;
  std::map<std::string, std::string> files;
};

inline CaseBuilder& CaseBuilder::AddRequest(const ref::PlanRequest& r) {
  nlohmann::json planner = PlanRequestToJson(r);
  for (const char* a : {"qo_indptr", "kv_indptr", "kv_last_page_lens"}) planner.erase(a);
  manifest["config"]["planner"] = planner;
  AddInt32("qo_indptr", r.qo_indptr, {}, 0x7f0000001000);
  AddInt32("kv_indptr", r.kv_indptr, {}, 0x7f0000002000);
  return AddInt32("kv_last_page_lens", r.kv_last_page_lens, {}, 0x7f0000003000);
}

// A plan buffer's values as a plain vector (ref::Int32Buffer::Ints has its own allocator).
inline std::vector<int32_t> Values(const ref::Int32Buffer& b) {
  return {b.data.begin(), b.data.end()};
}

inline CaseBuilder& CaseBuilder::AddPlan(const ref::Plan& p, uint64_t base) {
  const auto rows = [](const ref::Int32Buffer& b, int64_t w) {
    return std::vector<int64_t>{b.size() / w, w};
  };
  AddInt32("work_indptr", Values(p.work_indptr), {}, base);
  AddInt32("work_info", Values(p.work_info), rows(p.work_info, 8), base + 0x10000);
  AddInt32("reduce_indptr", Values(p.reduce_indptr), {}, base + 0x20000);
  AddInt32("reduce_final_map", Values(p.reduce_final_map), rows(p.reduce_final_map, 2),
           base + 0x30000);
  AddInt32("reduce_partial_map", Values(p.reduce_partial_map), {}, base + 0x40000);
  return Add("work_metadata_ptrs", "uint64", {2}, Bytes(std::vector<uint64_t>{0, 0}),
             base + 0x50000);
}

}  // namespace mlasim::io::test
